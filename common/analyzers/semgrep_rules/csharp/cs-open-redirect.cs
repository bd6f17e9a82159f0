public class AccountController : Controller
{
    public IActionResult Done([FromQuery] string returnUrl)
    {
        // ruleid: cs-open-redirect
        return Redirect(returnUrl);
    }

    public IActionResult Next()
    {
        string next = Request.Query["next"];
        // ruleid: cs-open-redirect
        Response.Redirect(next);
        return Ok();
    }

    public IActionResult Safe([FromQuery] string returnUrl)
    {
        if (Url.IsLocalUrl(returnUrl))
        {
            // ok: cs-open-redirect
            return Redirect(returnUrl);
        }
        // ok: cs-open-redirect
        return LocalRedirect(returnUrl);
    }
}
