"""fetch.pull_input against the fake provider server (each provider) and the diff parser:
nothing dropped silently, missing patches rebuilt from contents, coverage for the rest."""

from __future__ import annotations

import pytest

from reviews_app.hosting import client_for
from reviews_app.hosting.base import ChangedFile
from reviews_app.hosting.fetch import header, name, pull_input, rebuild
from reviews_app.pipeline.diffs import prepare
from tests.fake_host import FakeHost
from tests.fake_hosts import FakeHosts

TOKEN = "fetch-T0KEN"
PROVIDERS = ["github", "gitlab", "forgejo"]
BIG_OLD = "".join(f"value_{i} = {i}\n" for i in range(600))
BIG_NEW = "".join(f"value_{i} = {i * 2}\n" for i in range(600))
BASE = {"app.py": "x = 1\n", "gone.py": "g = 1\n", "mv.py": "m = 1\n", "big.py": BIG_OLD,
        "keep.md": "keep\n"}
HEAD = {"app.py": "x = 2\n", "gone.py": None, "mv.py": None, "moved.py": "m = 1\nn = 2\n",
        "big.py": BIG_NEW, "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00", "new dir/n é.py": "y = 3\n"}
LIMITS = dict(max_bytes=2_000_000, max_files=100, max_file_bytes=200_000)


@pytest.fixture
def hosts():
    with FakeHosts(token=TOKEN) as h:
        h.add_repo("octo/demo")
        h.patch_limit = 3000          # big.py's patch is left out / collapsed
        h.open_pull(7, base=BASE, head=HEAD, renames={"moved.py": "mv.py"})
        yield h


@pytest.fixture(params=PROVIDERS)
def client(hosts, request):
    c = client_for(hosts.repo_ref(request.param))
    c.provider = request.param
    yield c
    c.close()


def _by_reason(coverage: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in coverage:
        out.setdefault(c["reason"], set()).add(c["path"])
    return out


def test_full_round_through_prepare(client, hosts):
    head = hosts.pull(7).head_sha
    inp = pull_input(client, 7, head_sha=head, **LIMITS)
    prepared = prepare(inp.diff_text, contents=inp.contents)
    files = {f["path"]: f for f in prepared.files}
    assert set(files) == {"app.py", "moved.py", "big.py", "new dir/n é.py"}
    assert files["moved.py"]["status"] == "renamed" and files["moved.py"]["old_path"] == "mv.py"
    assert files["new dir/n é.py"]["status"] == "added"
    assert files["big.py"]["added"] == 599 and files["big.py"]["removed"] == 599
    assert all(f["mode"] == "heavy" for f in files.values())   # contents were filled in
    assert inp.contents["app.py"] == "x = 2\n" and inp.contents["big.py"] == BIG_NEW
    assert inp.contents["gone.py"] is None and inp.contents["logo.png"] is None
    reasons = _by_reason(prepared.coverage)
    assert reasons["binary"] == {"logo.png"} and reasons["deleted"] == {"gone.py"}
    assert inp.coverage == []
    assert "diff --git a/mv.py b/moved.py\nrename from mv.py\nrename to moved.py\n" \
        in inp.diff_text
    assert "deleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n" in inp.diff_text
    assert TOKEN not in inp.diff_text


def test_missing_patch_is_rebuilt_from_contents(client, hosts):
    head, base = hosts.pull(7).head_sha, hosts.pull(7).base_sha
    inp = pull_input(client, 7, head_sha=head, **LIMITS)
    big = next(f for f in inp.files if f.path == "big.py")
    assert "\n-value_1 = 1\n" in big.patch and "\n+value_1 = 2\n" in big.patch
    assert (big.additions, big.deletions) == (599, 599)
    reads = [r for r in hosts.requests if "big.py" in r.route]
    refs = sorted(r.query.get("ref") for r in reads)
    if client.provider == "forgejo":   # Forgejo's .diff had the patch: only the new text
        assert refs == [head]
    else:
        assert refs == sorted([head, base])


def test_binary_and_too_large_say_so(client, hosts):
    head = hosts.pull(7).head_sha
    inp = pull_input(client, 7, head_sha=head, max_bytes=2_000_000, max_files=100,
                     max_file_bytes=1000)
    prepared = prepare(inp.diff_text, contents=inp.contents)
    reasons = _by_reason(inp.coverage + prepared.coverage)
    assert reasons["binary"] == {"logo.png"}
    if client.provider == "forgejo":   # it had the patch: reviewed light, no content
        assert "big.py" in {f["path"] for f in prepared.files}
        assert inp.contents["big.py"] is None
    else:
        assert reasons["over_byte_limit"] == {"big.py"}
        (entry,) = [c for c in inp.coverage if c["path"] == "big.py"]
        assert entry["reviewed"] is False and "larger than 1,000 bytes" in entry["detail"]
        assert "big.py" not in inp.diff_text
    every = {f.path for f in inp.files}
    seen = {f["path"] for f in prepared.files} | {c["path"] for c in
                                                  inp.coverage + prepared.coverage}
    assert every <= seen   # no file dropped silently


def test_max_files_and_max_bytes(client, hosts):
    many = {f"m{i:02}.py": f"v = {i}\n" for i in range(12)}
    hosts.open_pull(8, base={}, head=many)
    hosts.max_per_page = 5
    head = hosts.pull(8).head_sha
    inp = pull_input(client, 8, head_sha=head, max_bytes=10**6, max_files=4,
                     max_file_bytes=1000)
    assert len(inp.files) == 12 and inp.diff_text.count("diff --git ") == 4
    rest = [c for c in inp.coverage if c["reason"] == "over_file_limit"]
    assert [c["path"] for c in rest] == [f"m{i:02}.py" for i in range(4, 12)]
    assert "first 4 files" in rest[0]["detail"]

    one = len(header(inp.files[0]).encode()) + 60
    inp = pull_input(client, 8, head_sha=head, max_bytes=one * 3, max_files=100,
                     max_file_bytes=1000)
    kept = inp.diff_text.count("diff --git ")
    assert 1 <= kept < 12
    cut = [c["path"] for c in inp.coverage if c["reason"] == "over_byte_limit"]
    assert len(cut) == 12 - kept and "fetch limit" in inp.coverage[0]["detail"]
    assert set(inp.contents) == {f"m{i:02}.py" for i in range(kept)}


def test_incremental_round_only_new_changes_in_the_pull_requests_files(client, hosts):
    first = hosts.pull(7).head_sha
    second = hosts.push(7, {"app.py": "x = 3\n", "keep.md": "keep\n",
                            "new dir/n é.py": "y = 4\n"})
    # a file changed and changed back is in the comparison of some providers' commits but
    # not in the pull request: it stays out
    inp = pull_input(client, 7, head_sha=second, from_sha=first, **LIMITS)
    assert sorted(f.path for f in inp.files) == ["app.py", "new dir/n é.py"]
    prepared = prepare(inp.diff_text, contents=inp.contents)
    files = {f["path"]: f for f in prepared.files}
    assert set(files) == {"app.py", "new dir/n é.py"}
    assert files["app.py"]["status"] == "modified"   # from the earlier head, not the base
    assert "-x = 2\n+x = 3\n" in inp.diff_text and "-y = 3\n+y = 4\n" in inp.diff_text


def test_incremental_round_ignores_files_outside_the_pull_request(hosts):
    first = hosts.pull(7).head_sha
    second = hosts.push(7, {"keep.md": "changed\n"})
    third = hosts.push(7, {"keep.md": "keep\n", "app.py": "x = 5\n"})
    c = client_for(hosts.repo_ref("github"))
    inp = pull_input(c, 7, head_sha=third, from_sha=second, **LIMITS)
    assert [f.path for f in inp.files] == ["app.py"]   # keep.md is back as at the base
    assert inp.diff_text.count("diff --git ") == 1
    inp = pull_input(c, 7, head_sha=third, from_sha=first, **LIMITS)
    assert [f.path for f in inp.files] == ["app.py"]
    c.close()


def test_a_comparison_at_the_providers_cap_reviews_the_whole_pull_request():
    """GitHub lists at most 300 files of a comparison: a round over that many is not cut
    silently, it becomes a full round and says so."""
    host = FakeHost()
    base = {f"m{i}.py": "x = 1\n" for i in range(310)}
    host.set_pull(7, base=base, head={**base, "new.py": "y = 1\n"}, head_sha="1" * 40)
    host.push(7, {**base, "new.py": "y = 2\n", **{f"m{i}.py": "x = 2\n" for i in range(310)}},
              "2" * 40)
    inp = pull_input(host, 7, head_sha="2" * 40, from_sha="1" * 40, **LIMITS)
    assert len(inp.files) == 311   # the pull request's whole file list, not the comparison
    [note] = [c for c in inp.coverage if c["reason"] == "full_round"]
    assert note["reviewed"] and "whole pull request was reviewed again" in note["detail"]
    small = pull_input(host, 7, head_sha="2" * 40, from_sha="2" * 40, **LIMITS)
    assert not any(c["reason"] == "full_round" for c in small.coverage)


class _Scripted(FakeHost):
    """FakeHost with the file list given as it is (clipped patches, odd names)."""

    listing: list[ChangedFile] = []

    def pull_files(self, number):
        self._call("pull_files")
        return [ChangedFile(**vars(f)) for f in self.listing]


def test_clipped_patch_and_too_large_keeps_the_part_sent():
    host = _Scripted()
    big = "".join(f"line {i}\n" for i in range(400))
    host.set_pull(3, base={"a.txt": big}, head={"a.txt": big + "more\n"})
    part = "@@ -398,2 +398,3 @@\n line 398\n line 399\n+more\n"
    host.listing = [ChangedFile("a.txt", "modified", patch=part, patch_clipped=True)]
    inp = pull_input(host, 3, head_sha="h" * 40, max_bytes=10**6, max_files=10,
                     max_file_bytes=100)
    assert [c["reason"] for c in inp.coverage] == ["clipped"]
    assert inp.coverage[0]["reviewed"] is True and "only the part" in inp.coverage[0]["detail"]
    assert prepare(inp.diff_text).files[0]["added"] == 1

    inp = pull_input(host, 3, head_sha="h" * 40, max_bytes=10**6, max_files=10,
                     max_file_bytes=100_000)   # small enough now: rebuilt in full
    assert inp.coverage == [] and "+more\n" in inp.diff_text
    assert inp.files[0].patch_clipped is False and inp.contents["a.txt"].endswith("more\n")


def test_unsafe_names_are_not_fetched_and_not_dropped():
    host = _Scripted()
    host.set_pull(4, base={}, head={"ok.py": "a = 1\n"})
    host.listing = [ChangedFile("ok.py", "added", patch="@@ -0,0 +1 @@\n+a = 1\n"),
                    ChangedFile("../../etc/passwd", "added", patch=None),
                    ChangedFile('we"ird\n.py', "added", patch="@@ -0,0 +1 @@\n+b = 2\n")]
    inp = pull_input(host, 4, head_sha="h" * 40, **LIMITS)
    assert host.calls.count("file_bytes") == 1   # ok.py only
    assert [c["path"] for c in inp.coverage] == ["../../etc/passwd"]
    assert '"b/we\\"ird\\n.py"' in inp.diff_text
    prepared = prepare(inp.diff_text, contents=inp.contents)
    assert [f["path"] for f in prepared.files] == ["ok.py"]
    assert any(c["path"].startswith("we") for c in prepared.coverage)


def test_header_and_name_helpers():
    assert name("a/", "x y.py") == "a/x y.py"
    assert name("b/", 'q"\t.py') == '"b/q\\"\\t.py"'
    assert header(ChangedFile("n.py", "renamed", previous_path="o.py")) == (
        "diff --git a/o.py b/n.py\nrename from o.py\nrename to n.py\n")
    assert rebuild("a\n", "a\nb") == "@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file\n"
    assert rebuild("same\n", "same\n") == ""


def test_fake_github_diff_media_type_and_base64_contents():
    """The older GitHub-only entry point still serves the diff and the JSON contents."""
    import base64

    import httpx

    from tests.fake_hosts import FakeGitHub

    with FakeGitHub(require_token=TOKEN) as gh:
        pr = gh.add_pr("o", "r", 1, base_files={"a.py": "x\n"}, files={"a.py": "y\n"})
        auth = {"Authorization": f"Bearer {TOKEN}"}
        diff = httpx.get(f"{gh.url}/repos/o/r/pulls/1",
                         headers={**auth, "Accept": "application/vnd.github.diff"}).text
        assert diff == pr["diff"] and "-x\n+y\n" in diff
        r = httpx.get(f"{gh.url}/repos/o/r/contents/a.py", params={"ref": pr["head_sha"]},
                      headers=auth)
        assert base64.b64decode(r.json()["content"]) == b"y\n"
        assert httpx.get(f"{gh.url}/repos/o/r/pulls/1").status_code == 401


def test_forgejo_diff_over_the_cap_rebuilds_every_patch(hosts, monkeypatch):
    from reviews_app.hosting import forgejo

    monkeypatch.setattr(forgejo, "DIFF_CAP", 100)
    c = client_for(hosts.repo_ref("forgejo"))
    files = c.pull_files(7)
    assert all(f.patch is None and f.patch_clipped for f in files)
    inp = pull_input(c, 7, head_sha=hosts.pull(7).head_sha, **LIMITS)
    prepared = prepare(inp.diff_text, contents=inp.contents)
    assert {f["path"] for f in prepared.files} == {"app.py", "moved.py", "big.py",
                                                   "new dir/n é.py"}
    assert "-x = 1\n+x = 2\n" in inp.diff_text
    c.close()
