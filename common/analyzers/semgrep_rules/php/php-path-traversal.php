<?php
$name = $_GET["file"];
// ruleid: php-path-traversal
readfile("/var/app/reports/" . $name);
$doc = $_POST["doc"];
$path = __DIR__ . "/docs/" . $doc;
// ruleid: php-path-traversal
$text = file_get_contents($path);
// ok: php-path-traversal
readfile("/var/app/reports/" . basename($name));
// ok: php-path-traversal
$cfg = file_get_contents(__DIR__ . "/config.json");
if (in_array($doc, $ALLOWED_DOCS, true)) {
    // ok: php-path-traversal
    readfile(__DIR__ . "/docs/" . $doc);
}
// ok: php-path-traversal
$body = file_get_contents("php://input");
// ok: php-path-traversal
$manifest = file_get_contents($_FILES["manifest"]["tmp_name"]);
// ruleid: php-path-traversal
move_uploaded_file($_FILES["manifest"]["tmp_name"], "/srv/uploads/" . $_FILES["manifest"]["name"]);
$page = $_GET["page"];
// ruleid: php-path-traversal
include "pages/" . $page . ".php";
// ok: php-path-traversal
include __DIR__ . "/pages/home.php";
