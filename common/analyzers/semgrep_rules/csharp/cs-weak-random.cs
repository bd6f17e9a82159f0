public class Tokens
{
    public string Issue()
    {
        var rng = new Random();
        // ruleid: cs-weak-random
        int resetCode = rng.Next(100000, 999999);
        var salt = new byte[16];
        // ruleid: cs-weak-random
        rng.NextBytes(salt);
        // ok: cs-weak-random
        var apiToken = Convert.ToHexString(RandomNumberGenerator.GetBytes(32));
        // ok: cs-weak-random
        int jitter = rng.Next(0, 100);
        return apiToken + resetCode + jitter;
    }
}
