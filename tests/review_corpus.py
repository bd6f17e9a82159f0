"""Bad and awkward review inputs, shared by the web form tests and the command tests.

Each case is ``(name, data, expect)``: ``expect`` is either ``("error", text)`` — the input
is refused with a message containing ``text`` and nothing is saved — or
``("review", reasons)`` — a (possibly partial) review starts and its coverage lists at
least these reasons.
"""

from __future__ import annotations

GOOD = """diff --git a/app/users.py b/app/users.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/app/users.py
@@ -0,0 +1,6 @@
+import subprocess
+
+
+def run(cmd, uid):
+    subprocess.call("grep %s /etc/passwd" % uid, shell=True)
+    return eval(cmd)
"""

JS = """diff --git a/web/app.js b/web/app.js
index 1111111..2222222 100644
--- a/web/app.js
+++ b/web/app.js
@@ -1,3 +1,4 @@
 const a = 1;
-const b = 2;
+const b = 3;
+document.body.innerHTML = location.hash;
 export { a, b };
"""

# A language no analyzer of ours reads (Elixir; Ruby is read by semgrep since issue 36):
# offline, nothing examines it (the secrets scanners look for keys only).
ELIXIR = """diff --git a/lib/users.ex b/lib/users.ex
index 1111111..2222222 100644
--- a/lib/users.ex
+++ b/lib/users.ex
@@ -1,3 +1,4 @@
 defmodule Users do
-  @limit 2
+  @limit 3
+  def find(id), do: Repo.query("select * from users where id = #{id}")
 end
"""

TRUNCATED = """diff --git a/lib/broken.py b/lib/broken.py
index 1111111..2222222 100644
--- a/lib/broken.py
+++ b/lib/broken.py
@@ -1,10 +1,12 @@
 x = 1
+y = 2
"""

RENAME_ONLY = """diff --git a/old_name.py b/new_name.py
similarity index 100%
rename from old_name.py
rename to new_name.py
"""

MODE_ONLY = """diff --git a/scripts/run.sh b/scripts/run.sh
old mode 100644
new mode 100755
"""

BINARY = """diff --git a/img/logo.png b/img/logo.png
index 1111111..2222222 100644
Binary files a/img/logo.png and b/img/logo.png differ
"""

NO_NEWLINE = """diff --git a/conf.py b/conf.py
index 1111111..2222222 100644
--- a/conf.py
+++ b/conf.py
@@ -1 +1 @@
-DEBUG = True
\\ No newline at end of file
+DEBUG = False
\\ No newline at end of file
"""

EVIL_NAMES = """diff --git a/../../etc/passwd b/../../etc/passwd
index 1111111..2222222 100644
--- a/../../etc/passwd
+++ b/../../etc/passwd
@@ -1 +1 @@
-root:x:0:0
+root::0:0
diff --git a/<img src=x onerror=alert(1)>.py b/<img src=x onerror=alert(1)>.py
new file mode 100644
--- /dev/null
+++ b/<img src=x onerror=alert(1)>.py
@@ -0,0 +1 @@
+print("<script>alert(1)</script>")
"""


def many_files(n: int) -> str:
    return "".join(
        f"diff --git a/pkg/m{i}.txt b/pkg/m{i}.txt\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/pkg/m{i}.txt\n@@ -0,0 +1 @@\n+line {i}\n" for i in range(n))

# GOOD with two NUL bytes in a comment on an added line: text that a paste, an upload and a
# command-line file can all carry (PostgreSQL stores none of it as it is).
NUL = GOOD.replace("import subprocess", "import subprocess  # \x00marker\x00", 1)

CASES = [
    ("empty", b"", ("error", "empty")),
    ("whitespace", b"  \n\n\t\n", ("error", "empty")),
    ("not a diff", b"Dear reviewer,\nplease look at my change.\nThanks!\n",
     ("error", "does not look like a unified diff")),
    ("truncated hunk alone", TRUNCATED.encode(), ("error", "")),
    ("truncated hunk beside a good file", (GOOD + TRUNCATED).encode(), ("review", {"unreadable"})),
    ("crlf line endings", GOOD.replace("\n", "\r\n").encode(), ("review", set())),
    ("rename only", RENAME_ONLY.encode(), ("error", "Nothing to review")),
    ("mode only", MODE_ONLY.encode(), ("error", "Nothing to review")),
    ("rename and mode beside a change", (RENAME_ONLY + MODE_ONLY + GOOD).encode(),
     ("review", {"rename_only", "mode_only"})),
    ("binary beside a change", (BINARY + GOOD).encode(), ("review", {"binary"})),
    ("no newline at end of file", NO_NEWLINE.encode(), ("review", set())),
    ("non-utf-8 bytes", GOOD.replace("grep", "gr\xe9p").encode("latin-1"),
     ("review", {"not_utf8"})),
    ("nul bytes", NUL.encode(), ("review", {"nul_bytes"})),
    ("../ and html file names", EVIL_NAMES.encode(), ("review", {"unreadable"})),
    ("thousands of files", many_files(5000).encode(), ("review", {"over_file_limit"})),
    ("elixir only", ELIXIR.encode(), ("review", {"model_only"})),
]


def git_repo(path, *versions: dict[str, str]):
    """A real git repository at ``path`` on branch main with one commit per version
    (file name → text)."""
    import subprocess

    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for i, files in enumerate(versions):
        for name, text in files.items():
            (path / name).write_text(text)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"version {i + 1}"], check=True)
    return path


def review_at_triage(user, diff: str = "", min_kept: int = 3):
    """A review of ``diff`` (GOOD + JS by default) started for ``user`` and brought to its
    triage gate by the worker: (run, review, the keys of its kept findings)."""
    from agents_app.models import Run
    from reviews_app import services
    from reviews_app.models import Review
    from tests.stack import wait_until

    inp = services.from_text(diff or GOOD + JS)
    run = services.start_review(user, inp, services.prepare(inp))
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "awaiting_triage", timeout=60,
               what="the review at its triage gate")
    review = Review.objects.get(run=run)
    keys = list(review.findings.filter(kept=True).values_list("key", flat=True))
    assert len(keys) >= min_kept, keys
    return run, review, keys
