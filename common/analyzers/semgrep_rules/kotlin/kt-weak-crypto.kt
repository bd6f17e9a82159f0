class Hasher {
    fun hash(password: ByteArray): ByteArray {
        // ruleid: kt-weak-crypto
        val md = MessageDigest.getInstance("MD5")
        // ruleid: kt-weak-crypto
        val cipher = Cipher.getInstance("AES/ECB/PKCS5Padding")
        // ok: kt-weak-crypto
        val sha = MessageDigest.getInstance("SHA-256")
        // ok: kt-weak-crypto
        val gcm = Cipher.getInstance("AES/GCM/NoPadding")
        return md.digest(password)
    }
}
