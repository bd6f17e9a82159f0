"""The sandboxed workspace, git plumbing and tool registry in agents_app.repos (no Django)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_app.repos import gitops, tools
from agents_app.repos.gitops import GitError
from agents_app.repos.workspace import ToolError, Workspace

from .waiting import wait_until

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t",
       "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def git(repo, *args):
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (root / "README.md").write_text("Hello World\nhello again\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    return Workspace(root)


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("print('v1')\n")
    (repo / "other.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


# ---------------------------------------------------------------- resolve
@pytest.mark.parametrize("bad", [
    "/etc/passwd", "C:\\x", "\\\\server\\share", "..", "../x", "a/../../x", "src/../README.md",
    ".git/config", ".git", "src/.git/x", "a\0b", "", "   ",
])
def test_resolve_refuses_escapes(ws, bad):
    with pytest.raises(ToolError, match="Refused"):
        ws.resolve(bad)


def test_resolve_error_does_not_leak_host_root(ws):
    with pytest.raises(ToolError) as info:
        ws.resolve("../secret")
    assert str(ws.root) not in str(info.value)
    assert "'../secret'" in str(info.value)


def test_resolve_symlinks_outside_are_refused(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (ws.root / "passwd").symlink_to("/etc/passwd")
    (ws.root / "etcdir").symlink_to("/etc")
    (ws.root / "sub").symlink_to(outside)
    (ws.root / "gitlink").symlink_to(ws.root / ".git" / "config")
    for bad in ["passwd", "etcdir", "etcdir/passwd", "sub/secret.txt", "sub/new.txt",
                "gitlink"]:
        with pytest.raises(ToolError, match="Refused"):
            ws.resolve(bad)
    with pytest.raises(ToolError):
        ws.read_file("sub/secret.txt")
    with pytest.raises(ToolError):
        ws.write_file("sub/new.txt", "x")
    assert not (outside / "new.txt").exists()


def test_resolve_symlink_inside_readable_but_not_writable(ws):
    (ws.root / "link.md").symlink_to("README.md")
    (ws.root / "srclink").symlink_to("src")
    assert ws.resolve("link.md") == ws.root / "README.md"
    assert "Hello World" in ws.read_file("link.md")
    for path in ["link.md", "srclink/pkg/mod.py", "srclink/new.py"]:
        with pytest.raises(ToolError, match="symbolic link"):
            ws.resolve(path, for_write=True)
    with pytest.raises(ToolError, match="symbolic link"):
        ws.write_file("link.md", "changed")
    assert (ws.root / "README.md").read_text().startswith("Hello World")


def test_resolve_normal_paths(ws):
    assert ws.resolve("src/pkg/mod.py", must_exist=True) == ws.root / "src/pkg/mod.py"
    assert ws.resolve("./src//pkg/new.py", for_write=True) == ws.root / "src/pkg/new.py"
    assert ws.resolve(".") == ws.root
    with pytest.raises(ToolError, match="does not exist"):
        ws.resolve("src/missing.py", must_exist=True)


# ---------------------------------------------------------------- reading
def test_read_file_numbering_and_ranges(ws):
    full = ws.read_file("src/pkg/mod.py")
    assert full.splitlines()[0] == "   1| line 1"
    assert full.splitlines()[-1] == "  10| line 10"
    assert ws.read_file("src/pkg/mod.py", 3, 4) == "   3| line 3\n   4| line 4"
    assert ws.read_file("src/pkg/mod.py", 9).splitlines() == ["   9| line 9", "  10| line 10"]
    assert ws.read_file("src/pkg/mod.py", 9, 99).count("|") == 2
    with pytest.raises(ToolError, match="only 10 lines"):
        ws.read_file("src/pkg/mod.py", 11)
    with pytest.raises(ToolError, match="before start"):
        ws.read_file("src/pkg/mod.py", 5, 4)


def test_read_file_refusals(ws):
    (ws.root / "img.bin").write_bytes(b"\x89PNG\0\0\x01")
    with pytest.raises(ToolError, match="binary"):
        ws.read_file("img.bin")
    with pytest.raises(ToolError, match="does not exist"):
        ws.read_file("nope.txt")
    with pytest.raises(ToolError, match="directory"):
        ws.read_file("src")
    small = Workspace(ws.root, max_read_bytes=20)
    with pytest.raises(ToolError, match="limit"):
        small.read_file("src/pkg/mod.py")
    assert small.read_file("src/pkg/mod.py", 2, 2) == "   2| line 2"


def test_list_files_skips_git_and_honours_pattern(ws):
    files = ws.list_files()
    assert files == ["README.md", "src/pkg/mod.py"]
    assert ws.list_files(pattern="*.py") == ["src/pkg/mod.py"]
    assert ws.list_files("src", pattern="src/pkg/*") == ["src/pkg/mod.py"]
    assert ws.list_files(max_depth=1) == ["README.md"]
    capped = Workspace(ws.root, max_list=1).list_files()
    assert capped == ["README.md"] and capped.truncated


def test_search_literal_regex_and_invalid(ws):
    (ws.root / "blob.bin").write_bytes(b"hello\0world")
    hits = ws.search("hello")
    assert [(h["path"], h["line"]) for h in hits] == [("README.md", 1), ("README.md", 2)]
    assert [h["line"] for h in ws.search("hello", case=True)] == [2]
    assert ws.search("line 1.", pattern="*.py") == []  # literal: '.' is not a wildcard
    regex_hits = ws.search(r"line 1\d?$", regex=True, pattern="*.py")
    assert [h["text"] for h in regex_hits] == ["line 1", "line 10"]
    with pytest.raises(ToolError, match="Invalid regular expression"):
        ws.search("(unclosed", regex=True)
    assert ws.search("core") == []  # .git/config is never searched


# ---------------------------------------------------------------- writing
def test_write_file_and_replace(ws):
    assert "Created" in ws.write_file("new/dir/file.txt", "a\nb\n")
    assert (ws.root / "new/dir/file.txt").read_text() == "a\nb\n"
    with pytest.raises(ToolError, match="not found"):
        ws.replace("README.md", "Goodbye", "x")
    (ws.root / "dup.txt").write_text("x = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        ws.replace("dup.txt", "x = 1", "x = 2")
    assert (ws.root / "dup.txt").read_text() == "x = 1\nx = 1\n"
    assert "Replaced 2" in ws.replace("dup.txt", "x = 1", "x = 2", count=2)
    assert (ws.root / "dup.txt").read_text() == "x = 2\nx = 2\n"
    ws.replace("README.md", "World", "Quorum")
    assert (ws.root / "README.md").read_text() == "Hello Quorum\nhello again\n"
    with pytest.raises(ToolError, match="Refused"):
        ws.write_file(".git/hooks/pre-commit", "evil")
    assert not (ws.root / ".git" / "hooks").exists()
    assert "Deleted" in ws.delete_file("dup.txt")
    assert not (ws.root / "dup.txt").exists()


def test_replace_every_occurrence_or_a_numbered_one(ws):
    """An ambiguous replace is refused; every occurrence or the n-th one is said explicitly."""
    (ws.root / "dup.txt").write_text("colour, colour\nthe colour\n")
    with pytest.raises(ToolError, match="occurs 3 times") as info:
        ws.replace("dup.txt", "colour", "color")
    assert "replace_all" in str(info.value) and "occurrence" in str(info.value)
    assert "Replaced the 2nd of 3 occurrences" in ws.replace("dup.txt", "colour", "color",
                                                             occurrence=2)
    assert (ws.root / "dup.txt").read_text() == "colour, color\nthe colour\n"
    assert "Replaced 2 occurrences" in ws.replace("dup.txt", "colour", "hue", every=True)
    assert (ws.root / "dup.txt").read_text() == "hue, color\nthe hue\n"
    with pytest.raises(ToolError, match="occurs only 2 times.*no 3rd"):
        ws.replace("dup.txt", "hue", "x", occurrence=3)
    with pytest.raises(ToolError, match="not both"):
        ws.replace("dup.txt", "hue", "x", occurrence=1, every=True)
    with pytest.raises(ToolError, match="not found"):
        ws.replace("dup.txt", "colour", "x", every=True)
    assert (ws.root / "dup.txt").read_text() == "hue, color\nthe hue\n"
    # The model's tool takes the same choices.
    ok, said = tools.call(tools.WRITE_TOOLS, ws, "replace_in_file", {
        "path": "dup.txt", "search": "hue", "replacement": "tint", "replace_all": True})
    assert ok and (ws.root / "dup.txt").read_text() == "tint, color\nthe tint\n", said
    ok, said = tools.call(tools.WRITE_TOOLS, ws, "replace_in_file", {
        "path": "dup.txt", "search": "tint", "replacement": "T", "occurrence": 0})
    assert not ok and "occurrence" in said


# ---------------------------------------------------------------- patches
MODIFY = """\
--- a/src/pkg/mod.py
+++ b/src/pkg/mod.py
@@ -2,3 +2,4 @@
 line 2
-line 3
+line three
+line 3.5
 line 4
"""


def test_apply_patch_modify_add_delete(ws):
    patch = MODIFY + """\
--- /dev/null
+++ b/src/pkg/new.py
@@ -0,0 +1,2 @@
+def f():
+    return 1
diff --git a/README.md b/README.md
deleted file mode 100644
--- a/README.md
+++ /dev/null
@@ -1,2 +0,0 @@
-Hello World
-hello again
"""
    summary = ws.apply_patch(patch)
    assert "modified src/pkg/mod.py" in summary and "created src/pkg/new.py" in summary
    lines = (ws.root / "src/pkg/mod.py").read_text().splitlines()
    assert lines[:5] == ["line 1", "line 2", "line three", "line 3.5", "line 4"]
    assert len(lines) == 11
    assert (ws.root / "src/pkg/new.py").read_text() == "def f():\n    return 1\n"
    assert not (ws.root / "README.md").exists()


def test_apply_patch_fuzz_finds_shifted_hunk(ws):
    (ws.root / "src/pkg/mod.py").write_text(
        "header\nheader2\n" + "".join(f"line {i}\n" for i in range(1, 11)))
    ws.apply_patch(MODIFY)
    assert (ws.root / "src/pkg/mod.py").read_text().splitlines()[4] == "line three"


def test_apply_patch_mismatch_writes_nothing(ws):
    before_mod = (ws.root / "src/pkg/mod.py").read_text()
    before_readme = (ws.root / "README.md").read_text()
    patch = """\
--- a/README.md
+++ b/README.md
@@ -1,2 +1,2 @@
-Hello World
+Hello Patch
 hello again
--- a/src/pkg/mod.py
+++ b/src/pkg/mod.py
@@ -2,2 +2,2 @@
 line 2
-line THREE
+line 3!
"""
    with pytest.raises(ToolError) as info:
        ws.apply_patch(patch)
    message = str(info.value)
    assert "Hunk #1" in message and "src/pkg/mod.py" in message
    assert "'line 3'" in message and "'line THREE'" in message
    assert (ws.root / "README.md").read_text() == before_readme
    assert (ws.root / "src/pkg/mod.py").read_text() == before_mod


def test_apply_patch_refuses_escaping_paths(ws, tmp_path):
    patch = """\
--- /dev/null
+++ b/../escaped.txt
@@ -0,0 +1 @@
+pwned
"""
    with pytest.raises(ToolError, match="Refused"):
        ws.apply_patch(patch)
    assert not (tmp_path / "escaped.txt").exists()
    git_patch = patch.replace("b/../escaped.txt", "b/.git/hooks/pre-commit")
    with pytest.raises(ToolError, match="Refused"):
        ws.apply_patch(git_patch)
    with pytest.raises(ToolError, match="parse|no file changes"):
        ws.apply_patch("this is not a diff\n")


def test_apply_patch_no_newline_and_existing_target(ws):
    (ws.root / "n.txt").write_text("a\nb")
    ws.apply_patch("""\
--- a/n.txt
+++ b/n.txt
@@ -1,2 +1,3 @@
 a
-b
\\ No newline at end of file
+b
+c
""")
    assert (ws.root / "n.txt").read_text() == "a\nb\nc\n"
    with pytest.raises(ToolError, match="already exists"):
        ws.apply_patch("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+x\n")
    with pytest.raises(ToolError, match="missing.txt: No such file.*use /dev/null"):
        ws.apply_patch("--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-x\n+y\n")


def test_apply_patch_roundtrips_real_git_diff(repo, tmp_path):
    """A diff produced by git (CRLF file, rename, missing final newline, new file) applied to
    a clean export reproduces the edited tree byte for byte."""
    (repo / "a.txt").write_text("".join(f"{i}\n" for i in range(1, 101)))
    (repo / "crlf.txt").write_bytes(b"x\r\ny\r\nz\r\n")
    (repo / "nonl.txt").write_text("keep\nme")
    (repo / "mv.txt").write_text("".join(f"{i}\n" for i in range(1, 31)))
    (repo / "same.txt").write_text("unchanged content\n" * 5)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fixtures")
    export = tmp_path / "export"
    export.mkdir()
    for name in ["a.txt", "crlf.txt", "nonl.txt", "mv.txt", "same.txt", "app.py", "other.py"]:
        (export / name).write_bytes((repo / name).read_bytes())
    (repo / "a.txt").write_text("".join(
        {3: "three\n", 50: "fifty\n", 99: "ninety-nine\n"}.get(i, f"{i}\n")
        for i in range(1, 101)))
    (repo / "crlf.txt").write_bytes(b"x\r\nY\r\nz\r\nw\r\n")
    (repo / "nonl.txt").write_text("keep\nmore\nme")
    git(repo, "mv", "mv.txt", "moved.txt")
    git(repo, "mv", "same.txt", "renamed.txt")
    (repo / "moved.txt").write_text((repo / "moved.txt").read_text().replace("15\n", "x\n"))
    (repo / "n.txt").write_text("new\n")
    git(repo, "add", "-A")
    patch = subprocess.run([*GIT, "diff", "--cached", "-M"], cwd=repo, check=True,
                           capture_output=True).stdout.decode()
    Workspace(export).apply_patch(patch)
    for path in repo.iterdir():
        if path.name != ".git":
            assert (export / path.name).read_bytes() == path.read_bytes(), path.name
    assert not (export / "mv.txt").exists() and not (export / "same.txt").exists()


def test_git_apply_itself_refuses_paths_outside_the_root(ws, tmp_path):
    """Even without our own checks, git apply will not write outside the root or into .git."""
    from agents_app.repos import patching

    for name in ["../escaped.txt", ".git/hooks/pre-commit", "src/../../escaped.txt"]:
        patch = f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+pwned\n"
        checked = patching.git_apply(ws.root, patch, 1, "--check")
        assert checked.returncode != 0 and "invalid path" in checked.text("stderr"), name
        applied = patching.git_apply(ws.root, patch, 1)
        assert applied.returncode != 0, name
    assert not (tmp_path / "escaped.txt").exists()
    assert not (ws.root / ".git" / "hooks").exists()


def test_apply_patch_refuses_rename_headers_outside_the_root(ws, tmp_path):
    before = (ws.root / "README.md").read_text()
    patch = ("diff --git a/README.md b/README.md\nsimilarity index 100%\n"
             "rename from README.md\nrename to ../moved.md\n")
    with pytest.raises(ToolError, match="Refused"):
        ws.apply_patch(patch)
    assert (ws.root / "README.md").read_text() == before
    assert not (tmp_path / "moved.md").exists()


def test_apply_patch_refuses_a_path_through_a_symlink(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("x\n")
    (ws.root / "link").symlink_to(outside)
    with pytest.raises(ToolError, match="Refused"):
        ws.apply_patch("--- a/link/x.txt\n+++ b/link/x.txt\n@@ -1 +1 @@\n-x\n+y\n")
    with pytest.raises(ToolError, match="Refused"):
        ws.apply_patch("--- /dev/null\n+++ b/link/new.txt\n@@ -0,0 +1 @@\n+y\n")
    assert (outside / "x.txt").read_text() == "x\n" and not (outside / "new.txt").exists()


def test_apply_patch_keeps_crlf_line_ends(ws):
    """A model reads a CRLF file as plain lines and writes its patch with plain newlines; the
    patched file keeps CRLF on every line, old and new."""
    (ws.root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    summary = ws.apply_patch("--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,4 @@\n one\n-two\n"
                             "+TWO\n+two and a half\n three\n")
    assert "modified win.txt (+2 -1)" in summary
    assert (ws.root / "win.txt").read_bytes() == b"one\r\nTWO\r\ntwo and a half\r\nthree\r\n"


def test_apply_patch_hunk_without_trailing_context_and_plain_names(ws):
    """Models often leave out the trailing context or the a/ b/ prefixes; the hunk still
    applies where its old lines are."""
    ws.apply_patch("--- src/pkg/mod.py\n+++ src/pkg/mod.py\n@@ -4,2 +4,2 @@\n line 4\n"
                   "-line 5\n+line five\n")
    lines = (ws.root / "src/pkg/mod.py").read_text().splitlines()
    assert lines[3:6] == ["line 4", "line five", "line 6"] and len(lines) == 10


def test_apply_patch_second_hunk_failing_names_it_and_changes_nothing(ws):
    before = (ws.root / "src/pkg/mod.py").read_text()
    patch = ("--- a/src/pkg/mod.py\n+++ b/src/pkg/mod.py\n@@ -1,2 +1,2 @@\n-line 1\n+line one\n"
             " line 2\n@@ -8,2 +8,2 @@\n line 8\n-line 9 (changed)\n+line nine\n")
    with pytest.raises(ToolError) as info:
        ws.apply_patch(patch)
    message = str(info.value)
    assert "Hunk #2" in message and "'src/pkg/mod.py'" in message
    assert "line 9 is 'line 9' but the hunk expects 'line 9 (changed)'" in message
    assert "Nothing was changed" in message
    assert (ws.root / "src/pkg/mod.py").read_text() == before


def test_apply_patch_in_a_git_worktree_and_in_a_folder_of_one(repo):
    """In a worktree git apply works on the files (index untouched); in a folder inside a
    repository the patch's paths are still relative to the workspace root."""
    (repo / "pkg").mkdir()
    (repo / "pkg" / "m.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pkg")
    summary = Workspace(repo).apply_patch(
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n"
        "-print('v1')\n+print('v2')\n--- /dev/null\n+++ b/pkg/n.py\n@@ -0,0 +1 @@\n+b = 2\n")
    assert "modified app.py (+1 -1)" in summary and "created pkg/n.py (+1)" in summary
    assert (repo / "app.py").read_text() == "print('v2')\n"
    assert git(repo, "status", "--porcelain") == "M app.py\n?? pkg/n.py"
    Workspace(repo / "pkg").apply_patch("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 3\n")
    assert (repo / "pkg" / "m.py").read_text() == "a = 3\n"


# ---------------------------------------------------------------- commands
def test_run_command_allowlist(ws):
    (ws.root / "test_tiny.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    allow = [[sys.executable, "-m", "pytest"]]
    result = ws.run_command([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "test_tiny.py"], allowlist=allow, timeout=60)
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.output and not result.timed_out
    with pytest.raises(ToolError, match="Command not allowed"):
        ws.run_command([sys.executable, "-c", "print(1)"], allowlist=allow)
    with pytest.raises(ToolError, match="Command not allowed"):
        ws.run_command([sys.executable, "-m"], allowlist=allow)
    for bad in ["../x.py", "/etc/passwd", "tests/../../x", "--rootdir=/etc"]:
        with pytest.raises(ToolError, match="Refused"):
            ws.run_command([sys.executable, "-m", "pytest", bad], allowlist=allow)


def test_run_command_no_shell(ws):
    script = ws.root / "echo_args.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    allow = [[sys.executable, str(script)]]
    result = ws.run_command([sys.executable, str(script), "; touch pwned", "$(touch pwned2)"],
                            allowlist=allow, timeout=30)
    assert result.exit_code == 0
    assert "'; touch pwned'" in result.output
    assert not (ws.root / "pwned").exists() and not (ws.root / "pwned2").exists()
    assert not list(ws.root.glob("pwned*"))


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_run_command_timeout_kills_process_group(ws, tmp_path):
    """The command starts a grandchild and waits for it to say it is running, then hangs; at
    the time limit the whole process group goes, grandchild included."""
    pid_file = tmp_path / "grandchild.pid"
    child = ws.root / "child.py"
    child.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                     "time.sleep(300)\n")
    script = ws.root / "sleepy.py"
    script.write_text("import os, subprocess, sys, time\n"
                      f"subprocess.Popen([sys.executable, {str(child)!r}])\n"
                      f"while not os.path.exists({str(pid_file)!r}):\n"
                      "    time.sleep(0.01)\n"
                      "print('grandchild running', flush=True)\n"
                      "time.sleep(300)\n")
    result = ws.run_command([sys.executable, str(script)],
                            allowlist=[[sys.executable, str(script)]], timeout=3)
    assert result.timed_out and result.exit_code is None
    assert "grandchild running" in result.output, "the grandchild did not start in time"
    pid = int(pid_file.read_text())
    wait_until(lambda: _gone(pid), 30, what="the grandchild to be killed")


def test_run_command_truncation_keeps_head_and_tail(ws):
    script = ws.root / "loud.py"
    script.write_text("print('HEAD-MARK')\nprint('x' * 100000)\nprint('TAIL-MARK')\n")
    result = ws.run_command([sys.executable, str(script)],
                            allowlist=[[sys.executable, str(script)]], max_output=1000)
    assert result.truncated
    assert result.output.startswith("HEAD-MARK")
    assert result.output.rstrip().endswith("TAIL-MARK")
    assert "omitted" in result.output and len(result.output) < 1200


# ---------------------------------------------------------------- gitops
def test_create_worktree_leaves_checkout_untouched(repo, tmp_path):
    (repo / "app.py").write_text("print('local edit')\n")  # the person's uncommitted work
    head_before = gitops.head_sha(repo)
    wt = tmp_path / "wt"
    base = gitops.create_worktree(repo, wt, "quorum/task-1", "main")
    assert base == head_before
    assert gitops.is_repo(wt) and gitops.is_repo(repo)
    assert not gitops.is_repo(repo / "missing")
    assert gitops.current_branch(repo) == "main"
    assert gitops.current_branch(wt) == "quorum/task-1"
    assert gitops.head_sha(repo) == head_before
    assert (repo / "app.py").read_text() == "print('local edit')\n"
    assert (wt / "app.py").read_text() == "print('v1')\n"
    assert "quorum/task-1" in gitops.branches(repo)
    # redelivery: same worktree, same answer, even after the branch moved on
    (wt / "app.py").write_text("print('v2')\n")
    gitops.commit_all(wt, "change")
    assert gitops.create_worktree(repo, wt, "quorum/task-1", "main") == base
    with pytest.raises(GitError):
        gitops.create_worktree(repo, wt, "quorum/other", "main")


def test_commit_all_diff_and_hooks_never_run(repo, tmp_path):
    hook = repo / ".git" / "hooks" / "pre-commit"
    marker = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    wt = tmp_path / "wt"
    base = gitops.create_worktree(repo, wt, "quorum/t", "main")
    assert gitops.commit_all(wt, "nothing") is None
    (wt / "app.py").write_text("print('v2')\n")
    (wt / "new.py").write_text("y = 2\n")
    sha = gitops.commit_all(wt, "executor change")
    assert sha == gitops.head_sha(wt) and sha != base
    assert not marker.exists()
    author = git(wt, "log", "-1", "--format=%an <%ae>")
    assert author == "Quorum Executor <executor@quorum.local>"
    patch = gitops.diff(wt, base)
    assert "+print('v2')" in patch and "-print('v1')" in patch and "b/new.py" in patch
    assert gitops.diff(repo, base, "quorum/t") == patch
    assert gitops.head_sha(repo) == base


def test_merge_fast_forward_brings_the_checkout_along(repo, tmp_path):
    wt = tmp_path / "wt"
    base = gitops.create_worktree(repo, wt, "quorum/ff", "main")
    (wt / "app.py").write_text("print('v2')\n")
    sha = gitops.commit_all(wt, "ff change")
    result = gitops.merge_into_base(repo, "main", "quorum/ff", "Merge quorum/ff")
    assert result == {"merged": True, "sha": sha, "fast_forward": True,
                      "checkout": str(repo.resolve())}
    assert gitops.head_sha(repo, "main") == sha != base
    # main is checked out in the person's working tree: its files follow the branch, so
    # `git status` does not show the change undone.
    assert (repo / "app.py").read_text() == "print('v2')\n"
    assert git(repo, "status", "--porcelain") == ""
    again = gitops.merge_into_base(repo, "main", "quorum/ff", "Merge again")
    assert again["merged"] and again.get("up_to_date") and again["sha"] == sha


def test_merge_three_way_creates_merge_commit(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/3way", "main")
    (wt / "app.py").write_text("print('v2')\n")
    branch_sha = gitops.commit_all(wt, "branch change")
    (repo / "other.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", "base moved on")
    base_sha = gitops.head_sha(repo)
    result = gitops.merge_into_base(repo, "main", "quorum/3way", "Merge quorum/3way")
    assert result["merged"] and result["fast_forward"] is False
    assert gitops.head_sha(repo, "main") == result["sha"]
    parents = git(repo, "rev-list", "--parents", "-n", "1", result["sha"]).split()[1:]
    assert parents == [base_sha, branch_sha]
    assert git(repo, "show", "main:app.py") == "print('v2')"
    assert git(repo, "show", "main:other.py") == "x = 2"
    assert git(repo, "log", "-1", "--format=%s", "main") == "Merge quorum/3way"
    assert (repo / "app.py").read_text() == "print('v2')\n"
    assert git(repo, "status", "--porcelain") == ""


def test_merge_blocked_by_uncommitted_changes_to_the_same_file_changes_nothing(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/dirty", "main")
    (wt / "app.py").write_text("print('v2')\n")
    gitops.commit_all(wt, "branch change")
    base_sha = gitops.head_sha(repo)
    (repo / "app.py").write_text("print('my local edit')\n")
    result = gitops.merge_into_base(repo, "main", "quorum/dirty", "Merge")
    assert result["merged"] is False and result["blocked_by"] == ["app.py"]
    assert "commit or stash" in result["message"]
    assert gitops.head_sha(repo, "main") == base_sha
    assert (repo / "app.py").read_text() == "print('my local edit')\n"


def test_merge_keeps_unrelated_uncommitted_changes(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/side", "main")
    (wt / "new.py").write_text("y = 1\n")
    gitops.commit_all(wt, "add a file")
    (repo / "app.py").write_text("print('my local edit')\n")
    result = gitops.merge_into_base(repo, "main", "quorum/side", "Merge")
    assert result["merged"] is True
    assert (repo / "new.py").read_text() == "y = 1\n"
    assert (repo / "app.py").read_text() == "print('my local edit')\n"
    assert git(repo, "status", "--porcelain") == "M app.py"


def test_merge_when_the_base_is_not_checked_out_moves_only_the_ref(repo, tmp_path):
    git(repo, "checkout", "-q", "-b", "elsewhere")
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/ref", "main")
    (wt / "app.py").write_text("print('v2')\n")
    sha = gitops.commit_all(wt, "change")
    result = gitops.merge_into_base(repo, "main", "quorum/ref", "Merge")
    assert result == {"merged": True, "sha": sha, "fast_forward": True}
    assert (repo / "app.py").read_text() == "print('v1')\n"  # the checkout is on elsewhere
    assert git(repo, "status", "--porcelain") == ""


def test_merge_conflict_changes_nothing(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/c", "main")
    (wt / "app.py").write_text("print('branch')\n")
    branch_sha = gitops.commit_all(wt, "branch change")
    (repo / "app.py").write_text("print('base')\n")
    git(repo, "commit", "-q", "-am", "conflicting base change")
    base_sha = gitops.head_sha(repo)
    result = gitops.merge_into_base(repo, "main", "quorum/c", "Merge quorum/c")
    assert result["merged"] is False
    assert result["conflicts"] == ["app.py"]
    assert "CONFLICT" in result["message"]
    assert gitops.head_sha(repo, "main") == base_sha
    assert gitops.head_sha(repo, "quorum/c") == branch_sha
    assert (repo / "app.py").read_text() == "print('base')\n"


def test_remove_worktree_is_idempotent(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/rm", "main")
    (wt / "scratch.txt").write_text("untracked")
    gitops.remove_worktree(repo, wt, "quorum/rm")
    assert not wt.exists()
    assert "quorum/rm" not in gitops.branches(repo)
    gitops.remove_worktree(repo, wt, "quorum/rm")
    assert gitops.branches(repo) == ["main"]
    assert "wt" not in git(repo, "worktree", "list")


def test_create_worktree_after_dir_lost_reuses_branch(repo, tmp_path):
    wt = tmp_path / "wt"
    base = gitops.create_worktree(repo, wt, "quorum/re", "main")
    gitops.remove_worktree(repo, wt, "quorum/re", delete_branch=False)
    assert "quorum/re" in gitops.branches(repo)
    assert gitops.create_worktree(repo, wt, "quorum/re", "main") == base
    assert gitops.current_branch(wt) == "quorum/re"


# ---------------------------------------------------------------- tools
def test_tools_call_outcomes(ws):
    registry = {**tools.READ_TOOLS, **tools.WRITE_TOOLS}
    ok, text = tools.call(registry, ws, "rm_rf", {})
    assert not ok and "Unknown tool 'rm_rf'" in text and "read_file" in text
    ok, text = tools.call(registry, ws, "read_file", {"start": "x"})
    assert not ok and "path" in text and "start" in text
    ok, text = tools.call(registry, ws, "read_file", {"file": "README.md"})
    assert not ok and "file" in text  # unknown field is reported, not ignored
    ok, text = tools.call(registry, ws, "read_file", {"path": "../etc/passwd"})
    assert not ok and text.startswith("Refused")
    ok, text = tools.call(registry, ws, "read_file", {"path": "README.md", "end": 1})
    assert ok and text == "   1| Hello World"
    ok, text = tools.call(registry, ws, "replace_in_file",
                          {"path": "README.md", "search": "World", "replacement": "There"})
    assert ok and (ws.root / "README.md").read_text().startswith("Hello There")
    ok, text = tools.call(tools.READ_TOOLS, ws, "write_file", {"path": "x", "content": "y"})
    assert not ok and not (ws.root / "x").exists()


def test_tools_call_caps_observation(ws):
    (ws.root / "big.txt").write_text("".join(f"row {i}\n" for i in range(5000)))
    ok, text = tools.call(tools.READ_TOOLS, ws, "read_file", {"path": "big.txt"}, limit=2000)
    assert ok and len(text) < 2300 and "truncated" in text
    assert text.startswith("   1| row 0") and text.endswith("row 4999")


def test_run_tests_tool(ws):
    (ws.root / "test_tiny.py").write_text("def test_fail():\n    assert 1 == 2\n")
    tool = tools.run_tests_tool([[sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]], 60)
    registry = {"run_tests": tool}
    ok, text = tools.call(registry, ws, "run_tests", {"args": ["-q", "test_tiny.py"]})
    assert ok and "exit code 1" in text and "1 failed" in text
    ok, text = tools.call(registry, ws, "run_tests", {"args": ["/etc"]})
    assert not ok and "Refused" in text


def test_describe_lists_tools_and_args():
    catalogue = tools.describe({**tools.READ_TOOLS, **tools.WRITE_TOOLS})
    for name in ["list_files", "read_file", "search", "write_file", "replace_in_file",
                 "apply_patch", "delete_file"]:
        assert f"### {name}" in catalogue
    for arg in ['"start"', '"regex"', '"replacement"', '"diff"', '"max_depth"']:
        assert arg in catalogue
    assert "write_file (modifies files)" in catalogue
    assert "read_file (modifies files)" not in catalogue


def test_no_django_imports_in_repos_package():
    code = ("import sys, agents_app.repos.tools, agents_app.repos.gitops; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent.parent,
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_run_command_minimal_env(ws, monkeypatch):
    monkeypatch.setenv("QUORUM_TEST_SECRET", "hunter2")
    script = ws.root / "env.py"
    script.write_text("import os\nprint(sorted(os.environ))\nprint(os.environ['HOME'])\n")
    result = ws.run_command([sys.executable, str(script)],
                            allowlist=[[sys.executable, str(script)]], env={"EXTRA": "1"})
    assert "QUORUM_TEST_SECRET" not in result.output
    assert "'EXTRA'" in result.output and "'GIT_TERMINAL_PROMPT'" in result.output
    assert os.path.expanduser("~") not in result.output.splitlines()[-1]


def test_merge_needs_new_git_for_diverged_branches(repo, tmp_path, monkeypatch):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/old", "main")
    (wt / "app.py").write_text("print('v2')\n")
    gitops.commit_all(wt, "branch change")
    (repo / "other.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", "base moved on")
    before = gitops.head_sha(repo, "main")
    monkeypatch.setattr(gitops, "git_version", lambda: (2, 37, 0))
    with pytest.raises(GitError, match="2.38"):
        gitops.merge_into_base(repo, "main", "quorum/old", "Merge")
    assert gitops.head_sha(repo, "main") == before


def test_merge_blocked_by_an_untracked_file_says_so(repo, tmp_path):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/untracked", "main")
    (wt / "notes.txt").write_text("from the branch\n")
    gitops.commit_all(wt, "add notes")
    (repo / "notes.txt").write_text("mine, not committed\n")
    result = gitops.merge_into_base(repo, "main", "quorum/untracked", "Merge")
    assert result["merged"] is False and "untracked files" in result["message"]
    assert "notes.txt" in result["message"] and "move or delete" in result["message"]
    assert (repo / "notes.txt").read_text() == "mine, not committed\n"


# ---------------------------------------------------------------- many runs on one repository
def test_twenty_runs_create_and_remove_worktrees_of_one_repository_at_once(repo, tmp_path):
    """Change runs on one repository run in parallel worker threads and processes; git's
    worktree bookkeeping (prune, the admin area, the branch refs) is not safe to change
    concurrently, so each run must wait its turn instead of failing its setup."""
    import threading

    count = 20
    barrier = threading.Barrier(count, timeout=60)
    errors: list[str] = []

    def one(n):
        try:
            for attempt in range(3):  # three waves make the race all but certain without a lock
                wt = tmp_path / "wts" / f"run-{n}-{attempt}"
                barrier.wait()
                gitops.create_worktree(repo, wt, f"quorum/run-{n}", "main")
                (wt / f"f{n}.txt").write_text(f"{n}\n")
                assert gitops.commit_all(wt, f"run {n}")
                barrier.wait()  # every run removes its worktree at the same moment, too
                gitops.remove_worktree(repo, wt, f"quorum/run-{n}")
        except Exception as exc:  # noqa: BLE001 - the test reports every failure
            errors.append(f"run {n}: {exc}")
            barrier.abort()  # the others stop waiting for this run

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert git(repo, "worktree", "list").count("\n") == 0  # only the person's checkout
    assert git(repo, "branch", "--list", "quorum/*") == ""


# ---------------------------------------------------------------- squash or merge commit
LONG_SUBJECT = ("Rename the greeting helper and update every caller across the package so "
                "that the new name is used everywhere")
MESSAGE = f"{LONG_SUBJECT}\n\nEdited by the person before merging."


def parents(repo, ref):
    return git(repo, "rev-list", "--parents", "-n", "1", ref).split()[1:]


@pytest.mark.parametrize("moved", [False, True], ids=["base-unchanged", "base-moved-on"])
def test_squash_makes_one_commit_with_the_message(repo, tmp_path, moved):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/sq", "main")
    (wt / "app.py").write_text("print('v2')\n")
    gitops.commit_all(wt, "first")
    (wt / "new.py").write_text("y = 1\n")
    gitops.commit_all(wt, "second")
    if moved:
        (repo / "other.py").write_text("x = 2\n")
        git(repo, "commit", "-q", "-am", "base moved on")
    base = gitops.head_sha(repo, "main")
    result = gitops.merge_into_base(repo, "main", "quorum/sq", MESSAGE, mode="squash")
    assert result["merged"] and result["squashed"] and not result["fast_forward"]
    assert gitops.head_sha(repo, "main") == result["sha"]
    assert parents(repo, "main") == [base]  # one commit, one parent: the branch's history stays out
    assert git(repo, "log", "-1", "--format=%B", "main") == MESSAGE
    assert git(repo, "log", "-1", "--format=%s", "main") == LONG_SUBJECT  # not cut
    assert git(repo, "show", "main:app.py") == "print('v2')"
    assert git(repo, "show", "main:new.py") == "y = 1"
    assert (repo / "new.py").read_text() == "y = 1\n" and git(repo, "status", "--porcelain") == ""
    # Squashing again (a merge stage run again after a crash) adds no empty commit.
    again = gitops.merge_into_base(repo, "main", "quorum/sq", MESSAGE, mode="squash")
    assert again["up_to_date"] and gitops.head_sha(repo, "main") == result["sha"]


@pytest.mark.parametrize("moved", [False, True], ids=["base-unchanged", "base-moved-on"])
def test_merge_mode_always_makes_a_merge_commit(repo, tmp_path, moved):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/mc", "main")
    (wt / "app.py").write_text("print('v2')\n")
    branch = gitops.commit_all(wt, "branch change")
    if moved:
        (repo / "other.py").write_text("x = 2\n")
        git(repo, "commit", "-q", "-am", "base moved on")
    base = gitops.head_sha(repo, "main")
    result = gitops.merge_into_base(repo, "main", "quorum/mc", MESSAGE, mode="merge")
    assert result["merged"] and not result["fast_forward"] and not result.get("squashed")
    assert parents(repo, "main") == [base, branch]  # a merge commit even when ff was possible
    assert git(repo, "log", "-1", "--format=%B", "main") == MESSAGE
    assert git(repo, "show", "main:app.py") == "print('v2')"
    again = gitops.merge_into_base(repo, "main", "quorum/mc", MESSAGE, mode="merge")
    assert again["up_to_date"] and gitops.head_sha(repo, "main") == result["sha"]


@pytest.mark.parametrize("message", ["", "   \n", "a\0b"])
def test_merge_refuses_an_empty_or_nul_message_and_changes_nothing(repo, tmp_path, message):
    wt = tmp_path / "wt"
    gitops.create_worktree(repo, wt, "quorum/bad", "main")
    (wt / "app.py").write_text("print('v2')\n")
    gitops.commit_all(wt, "change")
    base = gitops.head_sha(repo, "main")
    for mode in ("squash", "merge"):
        with pytest.raises(GitError, match="commit message"):
            gitops.merge_into_base(repo, "main", "quorum/bad", message, mode=mode)
    assert gitops.head_sha(repo, "main") == base
