<?php
function store($password, $data, $key) {
    // ruleid: php-weak-crypto
    $h = md5($password);
    // ruleid: php-weak-crypto
    $sig = hash("sha1", $data);
    // ruleid: php-weak-crypto
    $enc = openssl_encrypt($data, "aes-128-ecb", $key);
    // ok: php-weak-crypto
    $good = password_hash($password, PASSWORD_DEFAULT);
    // ok: php-weak-crypto
    $digest = hash("sha256", $data);
    // ok: php-weak-crypto
    $enc2 = openssl_encrypt($data, "aes-256-gcm", $key, 0, $iv, $tag);
    return [$h, $sig, $enc, $good, $digest, $enc2];
}
