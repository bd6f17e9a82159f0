"""The provider clients (GitHub, GitLab, Forgejo) over real HTTP against the fake provider
server: every call, pagination, review events, inline positions, errors and the token."""

from __future__ import annotations

import ast
import email.utils
import pathlib
import socket
import time

import httpx
import pytest

from reviews_app import hosting
from reviews_app.hosting import client_for
from reviews_app.hosting.base import (
    SUMMARY_MARKER,
    HostError,
    InlineComment,
    RepoRef,
    ReviewPost,
)
from reviews_app.hosting.http import Api, TooLarge, retry_after_of
from reviews_app.hosting.summary import upsert_summary
from tests.fake_hosts import FakeHosts

TOKEN = "s3cret-T0KEN-value-42"
PROVIDERS = ["github", "gitlab", "forgejo"]
BASE = {"app.py": "def f():\n    return 1\n\n\nx = f()\n", "docs/readme.md": "hello\n"}
HEAD = {"app.py": "def f():\n    return 2\n\n\nx = f()\ny = x\n", "new dir/n é.py": "z = 3\n"}


@pytest.fixture
def hosts():
    with FakeHosts(token=TOKEN) as h:
        h.add_repo("octo/demo")
        h.open_pull(7, base=BASE, head=HEAD, title="Fix f", author="bob")
        yield h


@pytest.fixture(params=PROVIDERS)
def provider(request):
    return request.param


@pytest.fixture
def client(hosts, provider):
    c = client_for(hosts.repo_ref(provider))
    yield c
    c.close()


def _files_route(provider: str) -> str:
    return {"github": "/pulls/7/files", "gitlab": "/merge_requests/7/diffs",
            "forgejo": "/pulls/7/files"}[provider]


# --- reading -----------------------------------------------------------------------------------
def test_pull(client, hosts, provider):
    info = client.pull(7)
    p = hosts.pull(7)
    assert (info.number, info.title, info.author, info.state) == (7, "Fix f", "bob", "open")
    assert (info.base_sha, info.head_sha) == (p.base_sha, p.head_sha)
    assert (info.base_ref, info.head_ref) == ("main", "feature")
    assert info.url.startswith("http") and info.draft is False
    p.state, p.draft = "merged", True
    info = client.pull(7)
    assert info.state == "merged" and info.draft is True
    p.state = "closed"
    assert client.pull(7).state == "closed"


def test_auth_header_per_provider(client, hosts, provider):
    client.pull(7)
    h = hosts.requests[-1].headers
    if provider == "gitlab":
        assert h["private-token"] == TOKEN and "authorization" not in h
        assert "/api/v4/projects/octo%2Fdemo/merge_requests/7" in hosts.url + "/api/v4" + \
            hosts.requests[-1].path
    elif provider == "github":
        assert h["authorization"] == f"Bearer {TOKEN}"
        assert h["x-github-api-version"] == "2022-11-28"
    else:
        assert h["authorization"] == f"token {TOKEN}"
    assert h["user-agent"] == "quorum-review"


def test_pull_files_reads_every_page(client, hosts, provider):
    many = {f"src/m{i}.py": f"v = {i}\n" for i in range(7)}
    hosts.open_pull(8, base={}, head=many)
    hosts.max_per_page = 2
    files = client.pull_files(8)
    assert sorted(f.path for f in files) == sorted(many)
    assert all(f.status == "added" and f.patch and "+v = " in f.patch for f in files)
    lists = [r for r in hosts.requests if r.route.endswith(_files_route(provider)
                                                          .replace("7", "8"))]
    assert len(lists) == 4   # 2 + 2 + 2 + 1
    assert [r.query.get("page") for r in lists] == ["1", "2", "3", "4"]


def test_pull_files_statuses_binary_and_missing_patch(client, hosts, provider):
    big_old = "".join(f"row {i}\n" for i in range(400))
    big_new = "".join(f"ROW {i}\n" for i in range(400))
    hosts.patch_limit = 2000
    hosts.open_pull(9, base={"big.txt": big_old, "gone.py": "g = 1\n", "mv.py": "m = 1\n"},
                    head={"big.txt": big_new, "gone.py": None, "mv.py": None,
                          "moved.py": "m = 1\nn = 2\n", "logo.png": b"\x89PNG\x00\x00"},
                    renames={"moved.py": "mv.py"})
    files = {f.path: f for f in client.pull_files(9)}
    assert set(files) == {"big.txt", "gone.py", "moved.py", "logo.png"}
    assert files["gone.py"].status == "removed"
    assert files["moved.py"].status == "renamed" and files["moved.py"].previous_path == "mv.py"
    assert "+n = 2" in files["moved.py"].patch
    assert files["logo.png"].binary and files["logo.png"].patch is None
    if provider == "forgejo":   # the .diff is whole: Forgejo has every patch
        assert "+ROW 1" in files["big.txt"].patch
    else:
        assert files["big.txt"].patch is None
    if provider == "gitlab":
        assert files["big.txt"].patch_clipped   # collapsed


def test_compare(client, hosts, provider):
    first = hosts.pull(7).head_sha
    second = hosts.push(7, {"app.py": "def f():\n    return 3\n\n\nx = f()\ny = x\n"})
    files = client.compare(first, second)
    assert [f.path for f in files] == ["app.py"]
    assert files[0].status == "modified"
    if provider != "forgejo":
        assert "+    return 3" in files[0].patch
    else:
        assert files[0].patch is None   # rebuilt from contents by fetch.pull_input


def test_file_bytes(client, hosts, provider):
    head = hosts.pull(7).head_sha
    assert client.file_bytes(head, "new dir/n é.py", max_bytes=100) == b"z = 3\n"
    assert client.file_bytes(head, "docs/readme.md", max_bytes=100) == b"hello\n"
    assert client.file_bytes(head, "nope.py", max_bytes=100) is None
    with pytest.raises(TooLarge) as exc:
        client.file_bytes(head, "app.py", max_bytes=10)
    assert "larger than 10 bytes" in str(exc.value)
    last = hosts.requests[-1].path
    raw_paths = [r.path for r in hosts.requests if "n%20%C3%A9.py" in r.path]
    assert raw_paths, "the path is quoted"
    if provider == "gitlab":
        assert "/repository/files/new%20dir%2Fn%20%C3%A9.py/raw" in raw_paths[0]
    assert f"ref={head}" in last
    count = len(hosts.requests)
    for bad in ("../secret", "a/../../b", "/abs", "a//b", "x\n"):
        with pytest.raises(HostError, match="not a safe repository path"):
            client.file_bytes(head, bad, max_bytes=100)
    assert len(hosts.requests) == count


# --- comments and reviews ----------------------------------------------------------------------
def test_comments_create_list_update(client, hosts, provider):
    cid = client.create_comment(7, "first")
    other = client.create_comment(7, "second")
    assert [c.body for c in client.comments(7)] == ["first", "second"]
    client.update_comment(7, cid, "first, edited")
    got = {c.id: c.body for c in client.comments(7)}
    assert got == {cid: "first, edited", other: "second"}
    assert [c["body"] for c in hosts.pull(7).comments] == ["first, edited", "second"]
    with pytest.raises(HostError) as exc:
        client.update_comment(7, "999999", "x")
    assert exc.value.status == 404 and not exc.value.retryable


def test_comments_paginate(client, hosts, provider):
    for i in range(5):
        client.create_comment(7, f"c{i}")
    hosts.max_per_page = 2
    assert [c.body for c in client.comments(7)] == [f"c{i}" for i in range(5)]


EVENT_NAMES = {"github": {"approve": "APPROVE", "request_changes": "REQUEST_CHANGES",
                          "comment": "COMMENT"},
               "forgejo": {"approve": "APPROVED", "request_changes": "REQUEST_CHANGES",
                           "comment": "COMMENT"}}


@pytest.mark.parametrize("event", ["approve", "request_changes", "comment"])
def test_post_review_events(client, hosts, provider, event):
    head = hosts.pull(7).head_sha
    review = ReviewPost(commit_sha=head, body="Quorum's review", event=event, comments=[
        InlineComment(path="app.py", line=2, body="returns 2 now"),
        InlineComment(path="app.py", line=6, start_line=5, body="two lines")])
    rid = client.post_review(7, review)
    assert rid
    p = hosts.pull(7)
    if provider in EVENT_NAMES:
        (posted,) = p.reviews
        assert posted["event"] == EVENT_NAMES[provider][event]
        assert posted["commit_id"] == head and posted["body"] == "Quorum's review"
        if provider == "github":
            assert posted["comments"] == [
                {"path": "app.py", "line": 2, "side": "RIGHT", "body": "returns 2 now"},
                {"path": "app.py", "line": 6, "side": "RIGHT", "start_line": 5,
                 "start_side": "RIGHT", "body": "two lines"}]
        else:
            assert posted["comments"] == [
                {"path": "app.py", "body": "returns 2 now", "new_position": 2},
                {"path": "app.py", "body": "two lines", "new_position": 6}]
    else:
        # GitLab: no top-level note (the merge request's one note is the summary); the
        # review is its discussions and the approval, and its id the first discussion's.
        assert p.comments == []
        first = p.review_comments[0]
        assert rid == f"{first['id']:040x}"
        positions = [c["position"] for c in p.review_comments]
        assert positions == [
            {"position_type": "text", "base_sha": p.base_sha, "start_sha": p.base_sha,
             "head_sha": head, "new_path": "app.py", "old_path": "app.py", "new_line": 2},
            {"position_type": "text", "base_sha": p.base_sha, "start_sha": p.base_sha,
             "head_sha": head, "new_path": "app.py", "old_path": "app.py", "new_line": 6}]
        assert [a["action"] for a in p.approvals] == (["approved"] if event == "approve"
                                                       else [])
    inline = client.review_comments(7)
    assert [(c.path, c.line, c.body) for c in inline] == [
        ("app.py", 2, "returns 2 now"), ("app.py", 6, "two lines")]
    assert client.comments(7) == []  # no conversation comment on any provider


def test_gitlab_inline_after_a_push_uses_that_versions_shas(hosts):
    c = client_for(hosts.repo_ref("gitlab"))
    old_head = hosts.pull(7).head_sha
    hosts.push(7, {"docs/readme.md": "hello again\n"})
    c.post_review(7, ReviewPost(commit_sha=old_head, body="b", event="comment",
                                comments=[InlineComment("app.py", 2, "x")]))
    assert hosts.pull(7).review_comments[0]["position"]["head_sha"] == old_head
    c.close()


def test_gitlab_approve_twice_and_request_changes_takes_it_back(hosts):
    c = client_for(hosts.repo_ref("gitlab"))
    head = hosts.pull(7).head_sha
    c.post_review(7, ReviewPost(head, "ok", "approve"))
    c.post_review(7, ReviewPost(head, "still ok", "approve"))   # already approved: fine
    assert len(hosts.pull(7).approvals) == 1
    c.post_review(7, ReviewPost(head, "no", "request_changes"))
    assert hosts.pull(7).approvals == []
    c.close()


def test_inline_comment_off_the_diff_is_a_clear_error(client, hosts, provider):
    review = ReviewPost(hosts.pull(7).head_sha, "b", "comment",
                        [InlineComment("docs/readme.md", 1, "not in the diff")])
    with pytest.raises(HostError) as exc:
        client.post_review(7, review)
    assert exc.value.status in (400, 422) and not exc.value.retryable
    assert "refused" in str(exc.value)


@pytest.mark.parametrize("stale", [False, True])
def test_upsert_summary_with_each_client(client, hosts, provider, stale):
    client.create_comment(7, "a person's comment")
    cid = upsert_summary(client, 7, "", "Review running")
    assert upsert_summary(client, 7, cid, "Review done") == cid
    bodies = [c.body for c in client.comments(7)]
    assert bodies == ["a person's comment", f"{SUMMARY_MARKER}\nReview done"]
    if stale:   # the stored id is wrong: the marked comment is found and updated
        assert upsert_summary(client, 7, "424242", "Again") == cid
    else:       # deleted on the provider: a new one is created
        p = hosts.pull(7)
        p.comments = [c for c in p.comments if str(c["id"]) != cid]
        new = upsert_summary(client, 7, cid, "Again")
        assert new != cid
    assert [c.body for c in client.comments(7)][-1] == f"{SUMMARY_MARKER}\nAgain"
    assert sum(SUMMARY_MARKER in c.body for c in client.comments(7)) == 1


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("status,retryable", [(401, False), (403, False), (404, False),
                                              (422, False), (500, True), (502, True),
                                              (503, True)])
def test_error_statuses(client, hosts, provider, status, retryable):
    hosts.fail("/7", status, body={"message": f"nope, token {TOKEN} was wrong"})
    with pytest.raises(HostError) as exc:
        client.pull(7)
    e = exc.value
    assert (e.status, e.retryable) == (status, retryable)
    assert e.retry_after is None
    assert TOKEN not in str(e) and TOKEN not in repr(e) and TOKEN not in str(e.args)
    assert client.name in str(e)


def test_wrong_token_is_401_without_echo(hosts, provider):
    ref = hosts.repo_ref(provider, token="ghp_wrongTOKENvalue999")
    c = client_for(ref)
    with pytest.raises(HostError) as exc:
        c.pull(7)
    assert exc.value.status == 401 and "rejected the token" in str(exc.value)
    assert "ghp_wrongTOKENvalue999" not in str(exc.value)
    c.close()


@pytest.mark.parametrize("status", [429, 403])
def test_rate_limit_with_retry_after_seconds(client, hosts, provider, status):
    hosts.rate_limit("/7", status=status, retry_after="7")
    with pytest.raises(HostError) as exc:
        client.pull(7)
    e = exc.value
    assert (e.status, e.retryable, e.retry_after) == (status, True, 7.0)
    assert "rate limit" in str(e) and "in 7 seconds" in str(e)


def test_rate_limit_with_http_date_and_reset(client, hosts, provider):
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    hosts.rate_limit("", status=429, retry_after=when)
    with pytest.raises(HostError) as exc:
        client.pull(7)
    assert 100 <= exc.value.retry_after <= 121
    hosts.clear_failures()
    hosts.rate_limit("", status=403, reset=1893456000)   # 2030-01-01 00:00:00 UTC
    with pytest.raises(HostError) as exc:
        client.comments(7)
    assert exc.value.retryable and exc.value.retry_after > 100_000
    assert "2030-01-01 00:00:00 UTC" in str(exc.value)


def test_fail_twice_then_succeed(client, hosts, provider):
    knob = hosts.fail("/7", 502, times=2)
    for _ in range(2):
        with pytest.raises(HostError) as exc:
            client.pull(7)
        assert exc.value.retryable
    assert client.pull(7).number == 7 and knob.hits == 2


def test_unreachable_is_retryable_and_clean():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = client_for(RepoRef("github", f"http://127.0.0.1:{port}", "o/r", token=TOKEN,
                           timeout=2))
    with pytest.raises(HostError) as exc:
        c.pull(1)
    assert exc.value.status is None and exc.value.retryable
    assert str(exc.value).startswith("Could not reach GitHub") and TOKEN not in str(exc.value)


def test_redirects_same_host_only(client, hosts, provider):
    hosts.fail("/7", 302, times=1, headers={"Location": hosts.api_url(provider) + (
        "/projects/octo%2Fdemo/merge_requests/7" if provider == "gitlab"
        else "/repos/octo/demo/pulls/7")})
    assert client.pull(7).number == 7
    hosts.fail("/7", 302, headers={"Location": "http://127.0.0.2:9/steal"})
    with pytest.raises(HostError, match="another host"):
        client.pull(7)


def test_answer_size_cap(hosts):
    c = client_for(hosts.repo_ref("github"))
    c.api.max_answer_bytes = 50
    with pytest.raises(TooLarge, match="larger than 50 bytes"):
        c.pull(7)
    c.close()


def test_bad_refs_refused_before_any_request(hosts):
    for ref in (RepoRef("github", hosts.url, "just-a-name", token=TOKEN),
                RepoRef("forgejo", hosts.url, "a/../b", token=TOKEN),
                RepoRef("gitlab", hosts.url, "", token=TOKEN),
                RepoRef("github", "ftp://x", "o/r", token=TOKEN),
                RepoRef("github", hosts.url, "o/r", token="tok\r\nX-Evil: 1")):
        with pytest.raises(HostError) as exc:
            client_for(ref)
        assert "X-Evil" not in str(exc.value)
    with pytest.raises(HostError, match="Unknown code host"):
        client_for(RepoRef("bitbucket", hosts.url, "o/r"))  # type: ignore[arg-type]
    assert hosts.requests == []


def test_retry_after_of():
    now = 1_800_000_000.0
    assert retry_after_of(httpx.Headers({"Retry-After": "30"}), now) == 30.0
    date = email.utils.formatdate(now + 90, usegmt=True)
    assert retry_after_of(httpx.Headers({"Retry-After": date}), now) == 90.0
    assert retry_after_of(httpx.Headers({"x-ratelimit-reset": str(int(now) + 60)}), now) == 60
    assert retry_after_of(httpx.Headers({"RateLimit-Reset": "12"}), now) == 12.0
    assert retry_after_of(httpx.Headers({"Retry-After": "soon"}), now) is None
    assert retry_after_of(httpx.Headers({}), now) is None


def test_scrub_hides_the_token_and_control_characters():
    api = Api(RepoRef("github", "https://api.example", "o/r", token=TOKEN), name="GitHub",
              auth={"Authorization": f"Bearer {TOKEN}"})
    assert api.scrub(f"x {TOKEN}\n\x1b[31m y") == "x *** [31m y"
    api.close()


def test_hosting_has_no_django_imports():
    for module in sorted(pathlib.Path(hosting.__file__).parent.glob("*.py")):
        tree = ast.parse(module.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] == "django"], module.name
