fun Application.routes() {
    routing {
        get("/hello") {
            val name = call.parameters["name"]
            // ruleid: kt-xss
            call.respondText("<h1>Hello $name</h1>", ContentType.Text.Html)
            // ok: kt-xss
            call.respondText("<h1>Hello ${HtmlUtils.htmlEscape(name)}</h1>", ContentType.Text.Html)
            // ok: kt-xss
            call.respondText("Hello $name", ContentType.Text.Plain)
        }
    }
}

class GreetServlet : HttpServlet() {
    override fun doGet(req: HttpServletRequest, resp: HttpServletResponse) {
        // ruleid: kt-xss
        resp.writer.print("<p>" + req.getParameter("q") + "</p>")
    }
}

class ExprGreeting {
    @GetMapping("/hi")
    // ruleid: kt-xss
    fun hi(@RequestParam name: String, res: HttpServletResponse) = res.writer.print("<p>Hello $name</p>")

    @GetMapping("/hi-count")
    // ok: kt-xss
    fun hiCount(@RequestParam name: String, res: HttpServletResponse) = res.writer.print("<p>${name.length}</p>")
}
