class GreetingsController < ApplicationController
  def show
    name = params[:name]
    # ruleid: rb-xss
    @greeting = "<p>Hello #{name}</p>".html_safe
    # ruleid: rb-xss
    render html: "<h1>#{params[:title]}</h1>".html_safe
    # ok: rb-xss
    @safe = "<p>Hello #{ERB::Util.html_escape(name)}</p>".html_safe
    # ok: rb-xss
    @banner = "<strong>Welcome</strong>".html_safe
  end
end
