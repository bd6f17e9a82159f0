public class FilesController : Controller
{
    public IActionResult Get([FromQuery] string name)
    {
        // ruleid: cs-path-traversal
        var text = System.IO.File.ReadAllText(Path.Combine("/srv/reports", name));
        // ok: cs-path-traversal
        var safe = System.IO.File.ReadAllText(Path.Combine("/srv/reports", Path.GetFileName(name)));
        return Content(text + safe);
    }

    public IActionResult Download()
    {
        string doc = Request.Query["doc"];
        // ruleid: cs-path-traversal
        return PhysicalFile("/srv/docs/" + doc, "application/pdf");
    }

    public IActionResult Fixed()
    {
        // ok: cs-path-traversal
        return PhysicalFile("/srv/docs/terms.pdf", "application/pdf");
    }
}
