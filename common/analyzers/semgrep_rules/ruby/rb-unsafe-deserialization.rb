class CartsController < ApplicationController
  def restore
    # ruleid: rb-unsafe-deserialization
    cart = Marshal.load(Base64.decode64(cookies[:cart]))
    # ruleid: rb-unsafe-deserialization
    prefs = YAML.load(params[:prefs])
    # ok: rb-unsafe-deserialization
    prefs = YAML.safe_load(params[:prefs], permitted_classes: [Symbol])
    # ok: rb-unsafe-deserialization
    data = JSON.parse(request.body.read)
    [cart, prefs, data]
  end
end
