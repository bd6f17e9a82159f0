<?php
function convert($file, $host) {
    // ruleid: php-command-injection
    system("convert " . $file . " out.png");
    // ruleid: php-command-injection
    $out = shell_exec("ping -c 1 $host");
    // ruleid: php-command-injection
    exec($_GET["cmd"]);
    // ok: php-command-injection
    system("convert " . escapeshellarg($file) . " out.png");
    // ok: php-command-injection
    exec("uptime");
    // ok: php-command-injection
    $p = proc_open(["ping", "-c", "1", $host], [], $pipes);
    return $out;
}
