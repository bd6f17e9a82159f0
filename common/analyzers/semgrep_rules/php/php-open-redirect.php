<?php
$next = $_GET["next"];
// ruleid: php-open-redirect
header("Location: " . $next);
// ruleid: php-open-redirect
return redirect($_POST["return_to"]);
// ok: php-open-redirect
header("Location: /account?tab=" . urlencode($_GET["tab"]));
// ok: php-open-redirect
header("Content-Type: text/plain; name=" . $next);
// ok: php-open-redirect
header("Location: /home");
