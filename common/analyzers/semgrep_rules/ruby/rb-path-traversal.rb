class DownloadsController < ApplicationController
  def show
    # ruleid: rb-path-traversal
    send_file Rails.root.join("reports", params[:name])
    path = File.join("/srv/docs", params[:doc])
    # ruleid: rb-path-traversal
    body = File.read(path)
    # ok: rb-path-traversal
    send_file Rails.root.join("reports", File.basename(params[:name]))
    # ok: rb-path-traversal
    notes = File.read(Rails.root.join("config", "notes.txt"))
    if ALLOWED_DOCS.include?(params[:doc])
      # ok: rb-path-traversal
      body = File.read(File.join("/srv/docs", params[:doc]))
    end
    [body, notes]
  end
end
