fun Application.login() {
    routing {
        get("/done") {
            val next = call.parameters["next"] ?: "/"
            // ruleid: kt-open-redirect
            call.respondRedirect(next)
            // ok: kt-open-redirect
            call.respondRedirect("/home")
        }
    }
}

@Controller
class LoginController {
    @GetMapping("/back")
    fun back(@RequestParam returnTo: String): String {
        if (returnTo in ALLOWED_TARGETS) {
            // ok: kt-open-redirect
            return "redirect:$returnTo"
        }
        // ruleid: kt-open-redirect
        return "redirect:$returnTo"
    }
}

@RestController
class ExprRedirects {
    @GetMapping("/out")
    // ruleid: kt-open-redirect
    fun out(@RequestParam to: String): RedirectView = RedirectView(to)

    @GetMapping("/home")
    // ok: kt-open-redirect
    fun home(@RequestParam tab: String): RedirectView = RedirectView("/home")
}

@RestController
class RelativeOnly {
    @GetMapping("/back")
    fun back(@RequestParam next: String, res: HttpServletResponse) {
        // ok: kt-open-redirect
        if (next.startsWith("/") && !next.startsWith("//")) res.sendRedirect(next)
        if (next.startsWith("/")) {
            // ruleid: kt-open-redirect
            res.sendRedirect(next)
        }
    }
}
