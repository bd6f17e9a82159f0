<?php
$name = $_GET["name"];
$xp = new DOMXPath($doc);
// ruleid: php-xpath-injection
$nodes = $xp->query("//user[@name='" . $name . "']");
// ruleid: php-xpath-injection
$count = $xp->evaluate("count(//order[customer='$name'])");
// ruleid: php-xpath-injection
$hits = $catalog->xpath(sprintf("/catalog/book[author='%s']", $_POST["author"]));
// ok: php-xpath-injection
$all = $xp->query("//user[@active='true']");
// ok: php-xpath-injection
$one = $xp->query("//order[@id=" . intval($_GET["id"]) . "]");
// ok: php-xpath-injection
$rows = $pdo->query("SELECT * FROM users WHERE name = '" . $name . "'");
