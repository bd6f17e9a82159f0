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
