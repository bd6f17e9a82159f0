post "/login" do
  # ruleid: rb-insecure-cookie
  response.set_cookie("session_id", value: token, path: "/")
  # ruleid: rb-insecure-cookie
  response.set_cookie(:remember_token, { value: token, expires: Time.now + 3600, secure: true })
  # ok: rb-insecure-cookie
  response.set_cookie("session_id", value: token, httponly: true, secure: true, same_site: :lax)
  # ok: rb-insecure-cookie
  response.set_cookie("theme", value: "dark")
end

class SessionsController < ApplicationController
  def create
    # ruleid: rb-insecure-cookie
    cookies[:auth_token] = { value: user.token, expires: 2.weeks.from_now }
    # ruleid: rb-insecure-cookie
    cookies.signed[:user_session] = { value: user.id, httponly: true }
    # ok: rb-insecure-cookie
    cookies.encrypted[:auth_token] = { value: user.token, httponly: true, secure: true }
    # ok: rb-insecure-cookie
    cookies[:locale] = { value: params[:locale] }
  end
end
