class ReportsController < ApplicationController
  def show
    # ruleid: rb-code-injection
    result = eval(params[:expr])
    # ruleid: rb-code-injection
    report = params[:type].constantize.new
    # ruleid: rb-code-injection
    value = report.send(params[:field])
    # ok: rb-code-injection
    value = report.public_send(ALLOWED_FIELDS.fetch(params[:field], :title))
    # ok: rb-code-injection
    total = eval("1 + 2")
    # ok: rb-code-injection
    klass = "Report".constantize
    [result, value, total, klass]
  end
end
