post "/login" do
  # ruleid: rb-trust-boundary
  session[:role] = params[:role]
  plan = params.fetch(:plan, "free")
  # ruleid: rb-trust-boundary
  session[:plan] = plan
  user = User.authenticate_by(email: params[:email], password: params[:password])
  # ok: rb-trust-boundary
  session[:user_id] = user.id
  # ok: rb-trust-boundary
  session[:page] = params[:page].to_i
  if %w[light dark].include?(params[:theme])
    # ok: rb-trust-boundary
    session[:theme] = params[:theme]
  end
end
