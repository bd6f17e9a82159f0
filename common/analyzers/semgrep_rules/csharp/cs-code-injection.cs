using Microsoft.CodeAnalysis.CSharp.Scripting;

public class Calc
{
    public async Task<object> Run(string expr, string typeName)
    {
        // ruleid: cs-code-injection
        var value = await CSharpScript.EvaluateAsync(expr);
        // ruleid: cs-code-injection
        var plugin = Activator.CreateInstance(Type.GetType(typeName));
        // ok: cs-code-injection
        var two = await CSharpScript.EvaluateAsync("1 + 1");
        // ok: cs-code-injection
        var known = Activator.CreateInstance(typeof(ReportPlugin));
        return value;
    }
}
