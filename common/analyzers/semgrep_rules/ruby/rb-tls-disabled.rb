http = Net::HTTP.new("api.example.com", 443)
http.use_ssl = true
# ruleid: rb-tls-disabled
http.verify_mode = OpenSSL::SSL::VERIFY_NONE
# ruleid: rb-tls-disabled
conn = Faraday.new(url: "https://api.example.com", ssl: { verify: false })
# ok: rb-tls-disabled
http.verify_mode = OpenSSL::SSL::VERIFY_PEER
# ok: rb-tls-disabled
conn = Faraday.new(url: "https://api.example.com", ssl: { ca_file: "/etc/ssl/ca.pem" })
