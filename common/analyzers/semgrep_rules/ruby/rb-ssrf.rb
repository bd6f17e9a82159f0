require "net/http"
class PreviewsController < ApplicationController
  def show
    # ruleid: rb-ssrf
    body = Net::HTTP.get(URI(params[:url]))
    # ruleid: rb-ssrf
    res = HTTParty.get("https://#{params[:host]}/status")
    # ok: rb-ssrf
    rates = HTTParty.get("https://api.example.com/rates")
    # ok: rb-ssrf
    hits = HTTParty.get("https://api.example.com/search?q=#{CGI.escape(params[:q])}")
    host = URI(params[:url]).host
    if ALLOWED_HOSTS.include?(host)
      # ok: rb-ssrf
      body = Net::HTTP.get(URI(params[:url]))
    end
    [body, res, rates, hits]
  end
end
