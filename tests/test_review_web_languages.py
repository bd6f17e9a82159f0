"""Issue 36's acceptance for PHP, Ruby, C#, Kotlin and the taint rules for web code, offline:
with the built-in offline model, through the whole pipeline (``manage.py review``: the real
engine, the real analyzers), injection in PHP and Ruby, path traversal and SSRF in a Flask
app and an Express ``sendFile`` of a query value are each found on the right line of the
right file; clean changes in the new languages are approved with every file examined by
semgrep, and sanitised flows are not reported."""

from __future__ import annotations

import pytest

from reviews_app.models import Review
from tests.test_review_languages import new_file, review

pytestmark = pytest.mark.django_db(transaction=True)

BAD = {
    "php": (new_file("public/users.php", [
        "<?php",
        "$id = $_GET['id'];",
        "$rows = $pdo->query(\"SELECT * FROM users WHERE id = \" . $id);",
        "system(\"ping -c 1 \" . $_GET['host']);",
        "echo '<p>' . $_GET['name'] . '</p>';"]),
        {("php-sql-injection", 3), ("php-command-injection", 4), ("php-xss", 5)}),
    "ruby": (new_file("app/controllers/users_controller.rb", [
        "class UsersController < ApplicationController",
        "  def index",
        "    @users = User.where(\"name = '#{params[:name]}'\")",
        "    system(\"convert #{params[:file]} out.png\")",
        "  end",
        "end"]), {("rb-sql-injection", 3), ("rb-command-injection", 4)}),
    "flask": (new_file("web/app.py", [
        "import os",
        "",
        "import requests",
        "from flask import Flask, request, send_file",
        "",
        "app = Flask(__name__)",
        "",
        "",
        "@app.route('/report')",
        "def report():",
        "    name = request.args.get('name')",
        "    return send_file(os.path.join('/srv/reports', name))",
        "",
        "",
        "@app.route('/preview')",
        "def preview():",
        "    url = request.args['url']",
        "    return requests.get(url, timeout=5).text"]),
        {("py-taint-path-traversal", 12), ("py-taint-ssrf", 18)}),
    "express": (new_file("server/files.js", [
        "const express = require('express');",
        "const path = require('path');",
        "const app = express();",
        "",
        "app.get('/download', (req, res) => {",
        "  res.sendFile(path.join(__dirname, 'files', req.query.name));",
        "});"]), {("js-taint-path-traversal", 6)}),
    "csharp": (new_file("Controllers/UsersController.cs", [
        "public class UsersController : Controller",
        "{",
        "    public IActionResult Find(SqlConnection conn, [FromQuery] string id)",
        "    {",
        "        var cmd = new SqlCommand(\"SELECT * FROM Users WHERE Id = '\" + id + \"'\", conn);",
        "        return Redirect(id);",
        "    }",
        "}"]), {("cs-sql-injection", 5), ("cs-open-redirect", 6)}),
    "kotlin": (new_file("src/main/kotlin/Users.kt", [
        "class UserRepo(private val conn: java.sql.Connection) {",
        "    fun find(id: String) =",
        "        conn.createStatement().executeQuery(\"SELECT * FROM users WHERE id = '$id'\")",
        "}"]), {("kt-sql-injection", 3)}),
}

CLEAN = {
    "php": new_file("public/users.php", [
        "<?php",
        "$stmt = $pdo->prepare('SELECT * FROM users WHERE id = ?');",
        "$stmt->execute([$_GET['id']]);",
        "echo '<p>' . htmlspecialchars($_GET['name'], ENT_QUOTES, 'UTF-8') . '</p>';"]),
    "ruby": new_file("app/controllers/users_controller.rb", [
        "class UsersController < ApplicationController",
        "  def index",
        "    @users = User.where(name: params[:name])",
        "    system(\"convert\", params[:file], \"out.png\")",
        "  end",
        "end"]),
    "flask": new_file("web/app.py", [
        "import os",
        "",
        "from flask import Flask, request, send_file",
        "from werkzeug.utils import secure_filename",
        "",
        "app = Flask(__name__)",
        "",
        "",
        "@app.route('/report')",
        "def report():",
        "    name = secure_filename(request.args.get('name', 'index.txt'))",
        "    return send_file(os.path.join('/srv/reports', name))"]),
    "express": new_file("server/files.js", [
        "const express = require('express');",
        "const path = require('path');",
        "const app = express();",
        "",
        "app.get('/download', (req, res) => {",
        "  res.sendFile(path.basename(String(req.query.name)), { root: path.join(__dirname, 'files') });",
        "});"]),
    "csharp": new_file("Services/Greeter.cs", [
        "public class Greeter",
        "{",
        "    public string Greet(string name) => $\"Hello, {name}\";",
        "}"]),
    "kotlin": new_file("src/main/kotlin/Greeter.kt", [
        "class Greeter {",
        "    fun greet(name: String) = \"Hello, $name\"",
        "}"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_injection_traversal_and_ssrf_are_found_on_their_lines(tmp_path, case):
    text, expected = BAD[case]
    code, data, err = review(tmp_path, text)
    assert code == 1, err
    assert data["review"]["verdict"]["final"] == "request_changes"
    # the offline model titles a finding "<rule>: <analyzer message>"
    found = {(f["title"].split(":", 1)[0], f["line"]) for f in data["findings"]}
    assert expected <= found, found
    path = text.split("\n", 1)[0].rsplit(" b/", 1)[1]
    assert {f["file"] for f in data["findings"]} == {path}
    [entry] = Review.objects.get().coverage
    assert entry["reviewed"] is True and "semgrep" in entry["analyzers"]


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_clean_and_sanitised_changes_are_approved(tmp_path, case):
    code, data, err = review(tmp_path, CLEAN[case])
    assert code == 0, (err, data["findings"])
    assert data["review"]["verdict"]["final"] == "approve"
    [entry] = Review.objects.get().coverage
    assert (entry["reason"], entry["reviewed"]) == ("analyzers_only", True)
    assert "semgrep" in entry["analyzers"]
