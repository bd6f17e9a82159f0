<?php
function issue($user) {
    // ruleid: php-weak-random
    $token = uniqid($user->email, true);
    // ruleid: php-weak-random
    $resetCode = mt_rand(100000, 999999);
    // ok: php-weak-random
    $csrfToken = bin2hex(random_bytes(32));
    // ok: php-weak-random
    $color = $COLORS[mt_rand(0, 3)];
    return [$token, $resetCode, $csrfToken, $color];
}
