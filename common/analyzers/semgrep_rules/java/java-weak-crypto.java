import java.security.MessageDigest;
import javax.crypto.Cipher;

class Crypto {
    void run() throws Exception {
        // ruleid: java-weak-crypto
        MessageDigest md = MessageDigest.getInstance("MD5");
        // ruleid: java-weak-crypto
        Cipher c = Cipher.getInstance("DES/CBC/PKCS5Padding");
        // ruleid: java-weak-crypto
        Cipher ecb = Cipher.getInstance("AES/ECB/PKCS5Padding");
        // ok: java-weak-crypto
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        // ok: java-weak-crypto
        Cipher gcm = Cipher.getInstance("AES/GCM/NoPadding");
    }
}
