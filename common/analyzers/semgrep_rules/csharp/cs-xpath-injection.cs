using System.Xml;
using System.Xml.XPath;
using Microsoft.AspNetCore.Mvc;

public class CatalogController : Controller
{
    public IActionResult Book([FromRoute] string author, [FromQuery] int id)
    {
        var doc = new XmlDocument();
        doc.Load("catalog.xml");
        // ruleid: cs-xpath-injection
        var hit = doc.SelectSingleNode("/catalog/book[author='" + author + "']");
        var nav = doc.CreateNavigator();
        // ruleid: cs-xpath-injection
        var count = nav.Evaluate($"count(//book[author='{author}'])");
        // ok: cs-xpath-injection
        var byId = doc.SelectSingleNode("/catalog/book[@id=" + id + "]");
        // ok: cs-xpath-injection
        var all = doc.SelectNodes("/catalog/book");
        return Ok(new { hit?.InnerText, count, byId?.InnerText, all?.Count });
    }
}

[ApiController]
public class PolicyController : ControllerBase
{
    [HttpGet("policy")]
    public IActionResult Section(string name)
    {
        var policy = new XmlDocument();
        policy.Load("policy.xml");
        // ruleid: cs-xpath-injection
        var node = policy.SelectSingleNode($"/policy/section[@name='{name}']");
        return Ok(node?.InnerXml);
    }

    private static XmlNode Lookup(XmlDocument doc, string key)
    {
        // ok: cs-xpath-injection
        return doc.SelectSingleNode("/policy/section[@key='" + key + "']");
    }
}
