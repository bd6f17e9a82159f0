class Tools {
    fun ping(host: String, file: String) {
        // ruleid: kt-command-injection
        Runtime.getRuntime().exec("ping -c 1 $host")
        // ruleid: kt-command-injection
        ProcessBuilder("sh", "-c", "convert " + file + " out.png").start()
        // ok: kt-command-injection
        ProcessBuilder("convert", file, "out.png").start()
        // ok: kt-command-injection
        Runtime.getRuntime().exec(arrayOf("ping", "-c", "1", host))
    }
}
