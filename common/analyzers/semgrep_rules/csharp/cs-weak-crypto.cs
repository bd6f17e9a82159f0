public class Hasher
{
    public byte[] Hash(byte[] password, Aes aes)
    {
        // ruleid: cs-weak-crypto
        using var md5 = MD5.Create();
        // ruleid: cs-weak-crypto
        aes.Mode = CipherMode.ECB;
        // ok: cs-weak-crypto
        using var sha = SHA256.Create();
        // ok: cs-weak-crypto
        aes.Mode = CipherMode.CBC;
        return md5.ComputeHash(password);
    }
}
