public class PreviewController : Controller
{
    private readonly HttpClient _http;

    public async Task<IActionResult> Show([FromQuery] string url)
    {
        // ruleid: cs-ssrf
        var body = await _http.GetStringAsync(url);
        // ok: cs-ssrf
        var rates = await _http.GetStringAsync("https://api.example.com/rates");
        var host = new Uri(url).Host;
        if (AllowedHosts.Contains(host))
        {
            // ok: cs-ssrf
            body = await _http.GetStringAsync(url);
        }
        return Content(body);
    }

    public async Task<IActionResult> Ping()
    {
        string target = Request.Query["target"];
        // ruleid: cs-ssrf
        var res = await _http.GetAsync("http://" + target + "/health");
        return Ok(res.StatusCode);
    }
}
