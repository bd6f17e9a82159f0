<?php
$user = $_POST["user"];
// ruleid: php-ldap-injection
$r = ldap_search($conn, "ou=people,dc=example,dc=com", "(uid=$user)");
// ruleid: php-ldap-injection
$r = ldap_search($conn, $base, "(&(objectClass=person)(mail=" . $_GET["mail"] . "))", ["cn"]);
// ruleid: php-ldap-injection
$r = ldap_list($conn, $base, sprintf("(cn=%s)", $name));
// ruleid: php-ldap-injection
$r = ldap_read($conn, $dn, "(memberUid={$login})");
// ok: php-ldap-injection
$r = ldap_search($conn, $base, "(uid=" . ldap_escape($user, "", LDAP_ESCAPE_FILTER) . ")");
// ok: php-ldap-injection
$r = ldap_search($conn, $base, sprintf("(cn=%s)", ldap_escape($name, "", LDAP_ESCAPE_FILTER)));
// ok: php-ldap-injection
$r = ldap_search($conn, $base, "(objectClass=person)");
// ok: php-ldap-injection
$r = ldap_search($conn, $base, $filter);
