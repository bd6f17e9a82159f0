class Tools {
    void run(String dir) throws Exception {
        // ruleid: java-command-injection
        Runtime.getRuntime().exec("ls " + dir);
        // ruleid: java-command-injection
        new ProcessBuilder("bash", "-c", "ls " + dir).start();
        // ok: java-command-injection
        new ProcessBuilder("ls", dir).start();
        // ok: java-command-injection
        Runtime.getRuntime().exec("uptime");
    }
}
