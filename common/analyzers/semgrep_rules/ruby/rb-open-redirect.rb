class SessionsController < ApplicationController
  def create
    # ruleid: rb-open-redirect
    redirect_to params[:return_to]
  end

  def done
    target = "#{params[:next]}"
    # ruleid: rb-open-redirect
    redirect_to target, status: :found
  end

  def safe
    # ok: rb-open-redirect
    redirect_to params[:return_to], allow_other_host: false
    # ok: rb-open-redirect
    redirect_to URI.parse(params[:next]).path
    # ok: rb-open-redirect
    redirect_to root_path
  end
end
