import javax.servlet.http.Cookie;
import javax.servlet.http.HttpServletResponse;
import org.springframework.http.ResponseCookie;

class Login {
    void done(String token, HttpServletResponse res) {
        // ruleid: java-insecure-cookie
        res.addCookie(new Cookie("JSESSIONID", token));
        Cookie remember = new Cookie("remember_me", token);
        remember.setHttpOnly(true);
        // ruleid: java-insecure-cookie
        res.addCookie(remember);
        // ruleid: java-insecure-cookie
        ResponseCookie jwt = ResponseCookie.from("access_token", token).path("/").build();
        Cookie auth = new Cookie("auth", token);
        auth.setSecure(true);
        auth.setHttpOnly(true);
        // ok: java-insecure-cookie
        res.addCookie(auth);
        // ok: java-insecure-cookie
        ResponseCookie good = ResponseCookie.from("access_token", token).httpOnly(true).secure(true).build();
        // ok: java-insecure-cookie
        res.addCookie(new Cookie("theme", "dark"));
        res.addHeader("Set-Cookie", jwt.toString() + good);
    }
}
