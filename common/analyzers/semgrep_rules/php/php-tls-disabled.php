<?php
$ch = curl_init("https://api.example.com");
// ruleid: php-tls-disabled
curl_setopt($ch, CURLOPT_SSL_VERIFYPEER, false);
// ruleid: php-tls-disabled
$client = new GuzzleHttp\Client(['base_uri' => 'https://api.example.com', 'verify' => false]);
// ok: php-tls-disabled
curl_setopt($ch, CURLOPT_SSL_VERIFYPEER, true);
// ok: php-tls-disabled
$client2 = new GuzzleHttp\Client(['verify' => '/etc/ssl/private-ca.pem']);
