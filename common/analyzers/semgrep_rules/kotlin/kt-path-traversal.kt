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
