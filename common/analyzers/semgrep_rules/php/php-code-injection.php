<?php
function run($expr) {
    // ruleid: php-code-injection
    $value = eval("return " . $expr . ";");
    // ruleid: php-code-injection
    include $_GET["page"] . ".php";
    // ruleid: php-code-injection
    $f = create_function('$a', $expr);
    // ok: php-code-injection
    include __DIR__ . "/header.php";
    // ok: php-code-injection
    $clean = preg_replace("/[^a-z]/i", "", $expr);
    // ok: php-code-injection
    assert($value !== null);
    return $value;
}
