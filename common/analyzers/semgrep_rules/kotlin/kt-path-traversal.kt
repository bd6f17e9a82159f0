fun Application.files() {
    routing {
        get("/report") {
            val name = call.parameters["name"]!!
            // ruleid: kt-path-traversal
            call.respondFile(File("/srv/reports"), name)
            // ok: kt-path-traversal
            call.respondFile(File("/srv/reports"), File(name).name)
        }
    }
}

@RestController
class DocsController {
    @GetMapping("/docs")
    fun doc(@RequestParam doc: String): String {
        // ruleid: kt-path-traversal
        val text = File("/srv/docs/" + doc).readText()
        // ok: kt-path-traversal
        val terms = File("/srv/docs/terms.txt").readText()
        return text + terms
    }
}

@RestController
class ExprFiles {
    @GetMapping("/raw")
    // ruleid: kt-path-traversal
    fun raw(@RequestParam name: String): ByteArray = File("/srv/exports/" + name).readBytes()

    @GetMapping("/raw-safe")
    // ok: kt-path-traversal
    fun rawSafe(@RequestParam name: String): ByteArray = File("/srv/exports/", File(name).name).readBytes()
}
