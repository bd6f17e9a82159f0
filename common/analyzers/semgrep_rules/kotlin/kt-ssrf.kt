@RestController
class PreviewController(private val rest: RestTemplate) {
    @GetMapping("/preview")
    fun preview(@RequestParam url: String): String? {
        // ruleid: kt-ssrf
        val body = rest.getForObject(url, String::class.java)
        // ok: kt-ssrf
        val rates = rest.getForObject("https://api.example.com/rates", String::class.java)
        val host = URI(url).host
        if (host in ALLOWED_HOSTS) {
            // ok: kt-ssrf
            return rest.getForObject(url, String::class.java)
        }
        return body + rates
    }
}

fun Application.ping() {
    routing {
        get("/ping") {
            val target = call.request.queryParameters["target"]
            // ruleid: kt-ssrf
            val conn = URL("http://$target/health").openConnection()
        }
    }
}

class UnfurlController(private val http: RestTemplate) {
    @GetMapping("/unfurl")
    // ruleid: kt-ssrf
    fun unfurl(@RequestParam link: String): String? = http.getForObject(link, String::class.java)

    @GetMapping("/weather")
    fun weather(@RequestParam city: String): String? =
        // ok: kt-ssrf
        http.getForObject("https://weather.example.com/v1?city={city}", String::class.java, city)

    @GetMapping("/preview")
    // ruleid: kt-ssrf
    fun preview(@RequestParam("u") target: String): String? = http.getForObject(target, String::class.java)
}
