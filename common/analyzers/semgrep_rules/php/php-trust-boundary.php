<?php
// ruleid: php-trust-boundary
session_id($_GET["PHPSESSID"]);
session_start();
$role = $_POST["role"];
// ruleid: php-trust-boundary
$_SESSION["role"] = $role;
// ruleid: php-trust-boundary
$request->session()->put("plan", $request->input("plan"));
// ok: php-trust-boundary
session_regenerate_id(true);
// ok: php-trust-boundary
$_SESSION["user_id"] = $user->id;
// ok: php-trust-boundary
$_SESSION["page"] = intval($_GET["page"]);
$theme = $_GET["theme"];
if (in_array($theme, ["light", "dark"], true)) {
    // ok: php-trust-boundary
    $_SESSION["theme"] = $theme;
}
// ok: php-trust-boundary
$_SESSION["visits"] = ($_SESSION["visits"] ?? 0) + 1;
