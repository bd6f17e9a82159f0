import jakarta.servlet.http.Cookie
import jakarta.servlet.http.HttpServletResponse
import org.springframework.http.ResponseCookie

class LoginEndpoint {
    fun login(token: String, res: HttpServletResponse) {
        // ruleid: kt-insecure-cookie
        res.addCookie(Cookie("session", token))
        val remember = Cookie("remember_me", token)
        remember.maxAge = 3600
        // ruleid: kt-insecure-cookie
        res.addCookie(remember)
        // ruleid: kt-insecure-cookie
        val jwt = ResponseCookie.from("access_token", token).path("/").build()
        // ok: kt-insecure-cookie
        val good = ResponseCookie.from("access_token", token).secure(true).httpOnly(true).sameSite("Lax").build()
        val flagged = Cookie("auth", token)
        flagged.secure = true
        flagged.isHttpOnly = true
        // ok: kt-insecure-cookie
        res.addCookie(flagged)
        // ok: kt-insecure-cookie
        res.addCookie(Cookie("theme", "dark"))
        val applied = Cookie("sid", token).apply { secure = true; isHttpOnly = true }
        // ok: kt-insecure-cookie
        res.addCookie(applied)
        res.addHeader("Set-Cookie", jwt.toString() + good.toString())
    }
}
