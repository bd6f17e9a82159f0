using System.Diagnostics;

public class Tools
{
    public void Ping(string host, string file)
    {
        // ruleid: cs-command-injection
        Process.Start("cmd.exe", "/c ping -n 1 " + host);
        var psi = new ProcessStartInfo("sh");
        // ruleid: cs-command-injection
        psi.Arguments = $"-c \"convert {file} out.png\"";
        // ok: cs-command-injection
        Process.Start("ping", "-n 1 example.com");
        var safe = new ProcessStartInfo("ping");
        // ok: cs-command-injection
        safe.ArgumentList.Add(host);
    }
}
