val trustAll = object : X509TrustManager {
    override fun checkClientTrusted(chain: Array<X509Certificate>, authType: String) {}
    // ruleid: kt-tls-disabled
    override fun checkServerTrusted(chain: Array<X509Certificate>, authType: String) {}
    override fun getAcceptedIssuers(): Array<X509Certificate> = arrayOf()
}

val client = OkHttpClient.Builder()
    // ruleid: kt-tls-disabled
    .hostnameVerifier { _, _ -> true }
    .build()

val strict = OkHttpClient.Builder()
    // ok: kt-tls-disabled
    .hostnameVerifier { host, session -> host == "api.example.com" && session.isValid }
    .build()

class PinnedTrust(private val delegate: X509TrustManager) : X509TrustManager {
    // ok: kt-tls-disabled
    override fun checkServerTrusted(chain: Array<X509Certificate>, authType: String) { delegate.checkServerTrusted(chain, authType) }
}
