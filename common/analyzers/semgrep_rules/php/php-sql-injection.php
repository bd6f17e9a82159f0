<?php
function find_user($pdo, $conn, $id, $name) {
    // ruleid: php-sql-injection
    $rows = $pdo->query("SELECT * FROM users WHERE id = " . $id);
    // ruleid: php-sql-injection
    $res = mysqli_query($conn, "SELECT * FROM users WHERE name = '$name'");
    $sql = sprintf("DELETE FROM users WHERE name = '%s'", $name);
    // ruleid: php-sql-injection
    $pdo->exec($sql);
    // ok: php-sql-injection
    $stmt = $pdo->prepare("SELECT * FROM users WHERE id = ?");
    $stmt->execute([$id]);
    // ok: php-sql-injection
    $all = $pdo->query("SELECT count(*) FROM users");
    // ok: php-sql-injection
    $log->info("looked up " . $id);
    return $rows;
}
