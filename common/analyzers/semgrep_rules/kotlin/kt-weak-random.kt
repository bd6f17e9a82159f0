class Tokens {
    fun issue(): String {
        // ruleid: kt-weak-random
        val resetCode = Random.nextInt(100000, 999999)
        // ruleid: kt-weak-random
        val sessionToken = java.util.Random().nextLong().toString(16)
        // ok: kt-weak-random
        val apiToken = SecureRandom().nextLong().toString(16)
        // ok: kt-weak-random
        val jitter = Random.nextInt(0, 100)
        return "$resetCode$sessionToken$apiToken$jitter"
    }
}
