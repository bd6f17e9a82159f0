class Signer
  def sign(password, data, key)
    # ruleid: rb-weak-crypto
    h = Digest::MD5.hexdigest(password)
    # ruleid: rb-weak-crypto
    cipher = OpenSSL::Cipher.new("aes-128-ecb")
    # ok: rb-weak-crypto
    d = Digest::SHA256.hexdigest(data)
    # ok: rb-weak-crypto
    good = OpenSSL::Cipher.new("aes-256-gcm")
    [h, cipher, d, good]
  end
end
