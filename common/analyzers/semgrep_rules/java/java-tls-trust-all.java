import javax.net.ssl.*;
import java.security.cert.X509Certificate;

class TrustAll implements X509TrustManager {
    public void checkClientTrusted(X509Certificate[] chain, String authType) {}
    // ruleid: java-tls-trust-all
    public void checkServerTrusted(X509Certificate[] chain, String authType) {}
    public X509Certificate[] getAcceptedIssuers() { return new X509Certificate[0]; }
}

class AnyHost implements HostnameVerifier {
    // ruleid: java-tls-trust-all
    public boolean verify(String host, SSLSession session) { return true; }
}

class Strict implements X509TrustManager {
    // ok: java-tls-trust-all
    public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
        delegate.checkServerTrusted(chain, authType);
    }
}
