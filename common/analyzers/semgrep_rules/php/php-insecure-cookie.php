<?php
// ruleid: php-insecure-cookie
setcookie("session_token", $token);
// ruleid: php-insecure-cookie
setcookie("remember_me", $id, time() + 86400, "/", "", false, true);
// ruleid: php-insecure-cookie
setcookie('auth', $jwt, ['expires' => time() + 3600, 'secure' => true, 'samesite' => 'Lax']);
// ruleid: php-insecure-cookie
setrawcookie("PHPSESSID", session_id(), 0, "/");
// ok: php-insecure-cookie
setcookie("session_token", $token, ['secure' => true, 'httponly' => true, 'samesite' => 'Strict']);
// ok: php-insecure-cookie
setcookie("remember_me", $id, time() + 86400, "/", "example.com", true, true);
// ok: php-insecure-cookie
setcookie("theme", "dark");
// ok: php-insecure-cookie
setcookie("auth", $jwt, $cookieOptions);
