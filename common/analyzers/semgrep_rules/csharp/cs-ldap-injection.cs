using System.DirectoryServices;
using Microsoft.AspNetCore.Mvc;

public class PeopleController : Controller
{
    public IActionResult Find([FromQuery] string name, [FromQuery] string mail)
    {
        // ruleid: cs-ldap-injection
        var bySam = new DirectorySearcher("(sAMAccountName=" + name + ")");
        var byMail = new DirectorySearcher(new DirectoryEntry("LDAP://dc=corp,dc=test"));
        // ruleid: cs-ldap-injection
        byMail.Filter = $"(&(objectClass=user)(mail={mail}))";
        // ok: cs-ldap-injection
        var escaped = new DirectorySearcher($"(sAMAccountName={EscapeLdap(name)})");
        // ok: cs-ldap-injection
        var fixedFilter = new DirectorySearcher("(objectClass=group)");
        return Ok(new { bySam.Filter, escaped.Filter, fixedFilter.Filter });
    }

    private static string EscapeLdap(string s) => s.Replace("(", "\\28").Replace(")", "\\29");
}

[ApiController]
public class DirectoryApiController : ControllerBase
{
    private readonly DirectoryEntry _root = new("LDAP://dc=corp,dc=test");

    [HttpGet("member")]
    public IActionResult Member(string upn, int page)
    {
        using var searcher = new DirectorySearcher(_root)
        {
            // ruleid: cs-ldap-injection
            Filter = "(userPrincipalName=" + upn + ")"
        };
        using var paged = new DirectorySearcher(_root)
        {
            // ok: cs-ldap-injection
            Filter = "(objectClass=user)", PageSize = page
        };
        return Ok(searcher.FindOne()?.Path ?? paged.Filter);
    }
}
