<?php
function load_cart() {
    // ruleid: php-unsafe-deserialization
    $cart = unserialize($_COOKIE["cart"]);
    // ruleid: php-unsafe-deserialization
    $prefs = unserialize(base64_decode($_POST["prefs"]));
    // ok: php-unsafe-deserialization
    $safe = unserialize($_COOKIE["cart"], ['allowed_classes' => false]);
    // ok: php-unsafe-deserialization
    $data = json_decode($_COOKIE["cart"], true);
    return [$cart, $prefs, $safe, $data];
}
