<?php
$name = $_GET["name"];
// ruleid: php-xss
echo "<p>Hello " . $name . "</p>";
// ruleid: php-xss
print("<h1>" . $_POST["title"] . "</h1>");
// ok: php-xss
echo "<p>Hello " . htmlspecialchars($name, ENT_QUOTES, "UTF-8") . "</p>";
// ok: php-xss
echo "<p>Page " . intval($_GET["page"]) . "</p>";
// ok: php-xss
echo "<p>Welcome</p>";
