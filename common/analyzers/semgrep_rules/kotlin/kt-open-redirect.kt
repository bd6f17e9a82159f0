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
