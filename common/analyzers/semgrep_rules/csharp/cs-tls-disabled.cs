public class Clients
{
    public HttpClient Make()
    {
        var handler = new HttpClientHandler();
        // ruleid: cs-tls-disabled
        handler.ServerCertificateCustomValidationCallback = (msg, cert, chain, errors) => true;
        // ruleid: cs-tls-disabled
        ServicePointManager.ServerCertificateValidationCallback = (s, c, ch, e) => true;
        // ok: cs-tls-disabled
        handler.ServerCertificateCustomValidationCallback = (msg, cert, chain, errors) => errors == SslPolicyErrors.None;
        return new HttpClient(handler);
    }
}
