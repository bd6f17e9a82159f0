<?php
$url = $_GET["url"];
// ruleid: php-ssrf
$ch = curl_init($url);
$client = new GuzzleHttp\Client();
// ruleid: php-ssrf
$res = $client->request("GET", "https://" . $_POST["host"] . "/status");
// ok: php-ssrf
$ch2 = curl_init("https://api.example.com/rates");
// ok: php-ssrf
$res2 = $client->request("GET", "https://api.example.com/search?q=" . urlencode($_GET["q"]));
$host = parse_url($url, PHP_URL_HOST);
if (in_array($host, $ALLOWED_HOSTS, true)) {
    // ok: php-ssrf
    $ch3 = curl_init($url);
}
