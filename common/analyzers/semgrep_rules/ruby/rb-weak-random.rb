class Tokens
  def issue
    # ruleid: rb-weak-random
    reset_token = rand(36**32).to_s(36)
    # ruleid: rb-weak-random
    @otp_code = Random.new.rand(100_000..999_999)
    # ok: rb-weak-random
    api_token = SecureRandom.hex(32)
    # ok: rb-weak-random
    color = %w[red blue].sample
    [reset_token, api_token, color]
  end
end
