public class ProfileController : Controller
{
    public IActionResult Show(string bio, string name)
    {
        // ruleid: cs-xss
        ViewBag.Bio = Html.Raw(bio);
        // ruleid: cs-xss
        return Content($"<h1>Hello {name}</h1>", "text/html");
    }

    public IActionResult Safe(string bio)
    {
        // ok: cs-xss
        ViewBag.Bio = Html.Raw(HtmlEncoder.Default.Encode(bio));
        // ok: cs-xss
        ViewBag.Banner = Html.Raw("<strong>Welcome</strong>");
        return View();
    }
}
