"""reviews_app.sources: local git ranges and GitHub pull requests, with untrusted input."""

import os
import socket
import subprocess

import pytest

from reviews_app import sources
from reviews_app.sources import SourceError, github
from reviews_app.sources import git as git_source
from tests.fake_hosts import FakeGitHub

TOKEN = "ghp_secretTOKENvalue123"


# --- helpers -------------------------------------------------------------------------------------
def git(repo, *args) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    out = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=Tester",
         "-c", "commit.gpgsign=false", "-C", str(repo), *args],
        check=True, capture_output=True, env=env)
    return out.stdout.decode().strip()


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def commit_all(repo, message) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    """root/proj: main has a.py, gone.txt, b.txt; feature edits a.py, deletes gone.txt, adds
    a file in a folder with a space and a binary file."""
    root = tmp_path / "root"
    proj = root / "proj"
    proj.mkdir(parents=True)
    git(proj, "init", "-q", "-b", "main")
    write(proj / "a.py", "def f():\n    return 1\n")
    write(proj / "gone.txt", "bye\n")
    write(proj / "b.txt", "unchanged\n")
    base = commit_all(proj, "base")
    git(proj, "checkout", "-q", "-b", "feature")
    write(proj / "a.py", "def f():\n    return 2\n\n\ndef g():\n    return 3\n")
    (proj / "gone.txt").unlink()
    write(proj / "sub dir" / "new é.py", "print('hi')\n")
    write(proj / "logo.bin", bytes(range(256)) * 4)
    head = commit_all(proj, "feature")
    return {"root": root, "proj": proj, "base": base, "head": head}


# --- allowed_repo ----------------------------------------------------------------------------------
def test_allowed_repo_inside_root(repo):
    assert git_source.allowed_repo(str(repo["proj"]), [str(repo["root"])]) == repo["proj"].resolve()
    # a subfolder of the work tree gives its top level
    (repo["proj"] / "sub dir").mkdir(exist_ok=True)
    assert git_source.allowed_repo(str(repo["proj"] / "sub dir"), [str(repo["root"])]) == \
        repo["proj"].resolve()


def test_allowed_repo_outside_root_refused(repo, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    with pytest.raises(SourceError, match="outside the folders Quorum may read") as exc:
        git_source.allowed_repo(str(repo["proj"]), [str(other)])
    assert str(other.resolve()) in str(exc.value)
    with pytest.raises(SourceError, match="outside"):
        git_source.allowed_repo(str(repo["root"] / ".." / "root" / ".." / "x"), [str(repo["root"])])


def test_symlink_out_of_root_refused(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    git(outside, "init", "-q", "-b", "main")
    link = repo["root"] / "sneaky"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(SourceError, match="outside the folders"):
        git_source.allowed_repo(str(link), [str(repo["root"])])
    with pytest.raises(SourceError, match="outside the folders"):
        git_source.git_range(str(link), "main..main", roots=[str(repo["root"])])


def test_plain_folder_inside_a_repo_outside_root_refused(tmp_path):
    """The root is a folder inside a bigger repository: git would find the parent's work tree."""
    outer = tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    git(outer, "init", "-q", "-b", "main")
    with pytest.raises(SourceError, match="outside the folders"):
        git_source.allowed_repo(str(outer / "inner"), [str(outer / "inner")])


def test_no_roots_means_turned_off(repo):
    for roots in ([], None, ["", "  "]):
        with pytest.raises(SourceError) as exc:
            git_source.allowed_repo(str(repo["proj"]), roots)
        assert str(exc.value) == git_source.TURNED_OFF
        assert "QUORUM_REPO_ROOTS" in str(exc.value)


def test_not_a_git_repo(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceError, match="is not a git repository"):
        git_source.allowed_repo(str(plain), [str(tmp_path)])


def test_nonexistent_and_empty_path(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        git_source.allowed_repo(str(tmp_path / "nope"), [str(tmp_path)])
    with pytest.raises(SourceError, match="Give the path"):
        git_source.allowed_repo("  ", [str(tmp_path)])
    with pytest.raises(SourceError):
        git_source.allowed_repo("bad\x00path", [str(tmp_path)])


# --- git_range -----------------------------------------------------------------------------------
def test_git_range_happy_path(repo):
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    assert src.kind == "git"
    assert src.label == f"proj {repo['base'][:7]}..{repo['head'][:7]}"
    assert src.meta == {"repo": str(repo["proj"].resolve()), "base": repo["base"],
                        "merge_base": repo["base"], "head": repo["head"],
                        "range": "main..feature", "changed_files": 4, "commits_total": 1,
                        "commits": [{"sha": repo["head"], "short": repo["head"][:7],
                                     "author": "Tester", "subject": "feature"}]}
    assert "diff --git a/a.py b/a.py" in src.diff_text
    assert "+    return 2" in src.diff_text and "-    return 1" in src.diff_text
    assert "deleted file mode" in src.diff_text
    assert "diff --git a/sub dir/new é.py b/sub dir/new é.py" in src.diff_text  # quotepath=off
    assert src.contents["a.py"] == "def f():\n    return 2\n\n\ndef g():\n    return 3\n"
    assert src.contents["sub dir/new é.py"] == "print('hi')\n"
    assert src.contents["gone.txt"] is None
    assert "b.txt" not in src.contents


def test_git_range_with_shas_and_ancestry_syntax(repo):
    src = git_source.git_range(str(repo["proj"]), f" {repo['base'][:10]}..feature~0 ",
                               roots=[str(repo["root"])])
    assert src.meta["base"] == repo["base"] and src.meta["head"] == repo["head"]
    src = git_source.git_range(str(repo["proj"]), "feature^..feature", roots=[str(repo["root"])])
    assert src.meta["base"] == repo["base"]


def test_binary_file_shows_as_differ_with_no_contents(repo):
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    assert "Binary files /dev/null and b/logo.bin differ" in src.diff_text
    assert src.contents["logo.bin"] is None
    assert "GIT binary patch" not in src.diff_text


def test_non_utf8_and_oversized_files_have_no_contents(repo):
    proj = repo["proj"]
    write(proj / "latin.txt", "caf\xe9\n".encode("latin-1"))
    write(proj / "big.txt", "x" * 2000 + "\n")
    commit_all(proj, "more")
    src = git_source.git_range(str(proj), "feature~1..feature", roots=[str(repo["root"])],
                               max_file_bytes=1000)
    assert src.contents == {"latin.txt": None, "big.txt": None}
    assert "latin.txt" in src.diff_text


def test_max_files_limits_contents(repo):
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])],
                               max_files=1)
    read = [p for p, c in src.contents.items() if c is not None]
    assert read == ["a.py"]
    assert src.contents["gone.txt"] is None


@pytest.mark.parametrize("rng", [
    "--output=/tmp/x..HEAD", "-p..HEAD", "main..", "..main", "a..b..c", "$(id)..HEAD", "",
    "   ", "main", "main....feature", "main..-feature", "main...-feature", "-main...feature", "main..feature;id", "main..@{u}",
    "main..fe ature", "x" * 201 + "..main", ".hidden..main", "main..feat\nure",
])
def test_range_injection_refused(repo, rng):
    with pytest.raises(SourceError):
        git_source.git_range(str(repo["proj"]), rng, roots=[str(repo["root"])])
    assert not os.path.exists("/tmp/x..HEAD")  # noqa: S108 - the injected option's target


def _main_moves_on(repo) -> str:
    """main gets a newer commit after feature left it; returns its sha."""
    proj = repo["proj"]
    git(proj, "checkout", "-q", "main")
    write(proj / "b.txt", "changed on main later\n")
    write(proj / "main_only.py", "X = 1\n")
    sha = commit_all(proj, "main moves on")
    git(proj, "checkout", "-q", "feature")
    return sha


@pytest.mark.parametrize("rng", ["main..feature", "main...feature"])
def test_range_is_the_branch_since_it_left_base(repo, rng):
    """Like a pull request: commits made on main after feature left it are not in the diff
    (diffing the two tips would show them reversed, as if feature deleted them)."""
    main_tip = _main_moves_on(repo)
    src = git_source.git_range(str(repo["proj"]), rng, roots=[str(repo["root"])])
    assert src.meta["base"] == main_tip
    assert src.meta["merge_base"] == repo["base"]
    assert src.meta["head"] == repo["head"]
    assert src.label == f"proj {repo['base'][:7]}..{repo['head'][:7]}"
    assert "main_only.py" not in src.diff_text
    assert "changed on main later" not in src.diff_text
    assert "b.txt" not in src.diff_text and "b.txt" not in src.contents
    assert "+    return 2" in src.diff_text
    assert [c["subject"] for c in src.meta["commits"]] == ["feature"]
    assert src.meta["changed_files"] == 4


def test_range_lists_its_commits_oldest_first(repo):
    proj = repo["proj"]
    write(proj / "c.py", "C = 1\n")
    second = commit_all(proj, "second: add c <b>bold</b>")
    git(proj, "-c", "user.name=Ann O'Hara", "commit", "-q", "--allow-empty", "-m",
        "third\n\nbody line")
    third = git(proj, "rev-parse", "HEAD")
    src = git_source.git_range(str(proj), "main...feature", roots=[str(repo["root"])])
    assert src.meta["commits_total"] == 3
    assert src.meta["commits"] == [
        {"sha": repo["head"], "short": repo["head"][:7], "author": "Tester",
         "subject": "feature"},
        {"sha": second, "short": second[:7], "author": "Tester",
         "subject": "second: add c <b>bold</b>"},
        {"sha": third, "short": third[:7], "author": "Ann O'Hara", "subject": "third"},
    ]


def test_range_without_commits_is_refused(repo):
    # feature is already in main (fast-forwarded): nothing on feature that main lacks
    git(repo["proj"], "branch", "-f", "merged", "feature")
    with pytest.raises(SourceError, match="has no commits that feature does not already "
                                          "have.*nothing to review"):
        git_source.git_range(str(repo["proj"]), "feature..merged", roots=[str(repo["root"])])
    # the wrong way round: main has nothing feature lacks
    with pytest.raises(SourceError, match="nothing to review. Check the order"):
        git_source.git_range(str(repo["proj"]), "feature...main", roots=[str(repo["root"])])


def test_unrelated_histories_are_refused(repo):
    proj = repo["proj"]
    git(proj, "checkout", "-q", "--orphan", "island")
    git(proj, "rm", "-rqf", ".")
    write(proj / "z.txt", "z\n")
    commit_all(proj, "island")
    with pytest.raises(SourceError, match="have no commit in common"):
        git_source.git_range(str(proj), "main..island", roots=[str(repo["root"])])


def test_single_revision_says_how_to_give_a_range(repo):
    with pytest.raises(SourceError, match=r"single revision.*feature~1\.\.feature"):
        git_source.git_range(str(repo["proj"]), "feature", roots=[str(repo["root"])])


def test_odd_ref_names_are_never_options(repo, tmp_path):
    """A branch whose name git allows but that looks like an option past the first
    character reaches git only after --end-of-options (or as a full sha)."""
    proj = repo["proj"]
    git(proj, "branch", "x--output", "feature")
    src = git_source.git_range(str(proj), "main...x--output", roots=[str(repo["root"])])
    assert src.meta["head"] == repo["head"]
    assert not (proj / "output").exists()


def test_unknown_revision(repo):
    with pytest.raises(SourceError, match="Unknown revision 'nosuch' in proj"):
        git_source.git_range(str(repo["proj"]), "main..nosuch", roots=[str(repo["root"])])
    # a tree (not a commit) is refused too
    tree = git(repo["proj"], "rev-parse", "main^{tree}")
    with pytest.raises(SourceError, match="Unknown revision"):
        git_source.git_range(str(repo["proj"]), f"{tree}..main", roots=[str(repo["root"])])


def test_max_bytes_truncates_at_file_boundary(repo):
    full = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    assert "truncated" not in full.meta
    sizes = full.diff_text.split("\ndiff --git ")
    limit = len(sizes[0].encode()) + len(sizes[1].encode()) + 20  # two files and a bit
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])],
                               max_bytes=limit)
    assert src.meta["truncated"] is True
    assert src.meta["truncated_files"] == 2
    assert len(src.diff_text.encode()) <= limit
    assert src.diff_text.count("diff --git ") == 2
    assert full.diff_text.startswith(src.diff_text)
    assert src.diff_text.endswith("\n")
    # too small for even one file: nothing kept, all files reported
    tiny = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])],
                                max_bytes=10)
    assert tiny.diff_text == "" and tiny.meta["truncated_files"] == 4


def test_git_ignores_external_diff_config(repo, tmp_path):
    marker = tmp_path / "pwned"
    git(repo["proj"], "config", "diff.external", f"touch {marker}; false")
    git(repo["proj"], "config", "diff.pydriver.textconv", f"touch {marker}; cat")
    write(repo["proj"] / ".git" / "info" / "attributes", "*.py diff=pydriver\n")
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    assert "+    return 2" in src.diff_text
    assert not marker.exists()


def test_git_reads_neither_our_git_variables_nor_the_users_config(repo, tmp_path, monkeypatch):
    """git runs in common.proc's environment: a GIT_DIR of ours cannot point it at another
    repository, and a user's ~/.gitconfig (here: no context lines) cannot change the diff."""
    clean = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    home = tmp_path / "home"
    write(home / ".gitconfig", "[diff]\n\tcontext = 0\n\trenames = false\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "nowhere"))
    src = git_source.git_range(str(repo["proj"]), "main..feature", roots=[str(repo["root"])])
    assert src.diff_text == clean.diff_text and " def f():" in src.diff_text  # context kept
    assert src.contents == clean.contents and src.meta == clean.meta


def test_git_output_past_its_cap_is_an_error_not_a_silent_cut(repo):
    """Only the diff is cut (at a file boundary); any other git answer over its cap is refused."""
    with pytest.raises(SourceError, match=r"git printed more than 10 bytes in .*smaller range"):
        git_source._git(repo["proj"], ["log", "--format=%H"], timeout=30, limit=10)
    assert git_source._git(repo["proj"], ["rev-parse", "main"], timeout=30, limit=100).strip() \
        == repo["base"].encode()


# --- parse_pr_url --------------------------------------------------------------------------------
@pytest.mark.parametrize("url,expected", [
    ("https://github.com/octo/demo/pull/12", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12/", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12/files", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12/files/", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12?w=1", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12#discussion_r1", ("octo", "demo", 12)),
    ("https://github.com/octo/demo/pull/12/files#diff-abc", ("octo", "demo", 12)),
    ("  https://github.com/My-Org/my.repo_2/pull/3  ", ("My-Org", "my.repo_2", 3)),
])
def test_parse_pr_url_good(url, expected):
    assert github.parse_pr_url(url) == expected


@pytest.mark.parametrize("url", [
    "", "github.com/octo/demo/pull/1", "http://github.com/octo/demo/pull/1",
    "https://gitlab.com/octo/demo/pull/1", "https://github.com.evil.com/octo/demo/pull/1",
    "https://evil.com/github.com/octo/demo/pull/1", "https://github.com/octo/demo/pull/0",
    "https://github.com/octo/demo/pull/-1", "https://github.com/octo/demo/pull/abc",
    "https://github.com/octo/demo/issues/1", "https://github.com/octo/demo/pull/1/commits",
    "https://github.com/../demo/pull/1", "https://github.com/octo/../pull/1",
    "https://github.com/octo/demo/pull/1 extra", "https://github.com/oc%74o/demo/pull/1",
    "https://github.com/octo/demo/pull/1\nx", "https://user@github.com/octo/demo/pull/1",
    "https://github.com/octo/demo/pull/99999999999",
])
def test_parse_pr_url_bad(url):
    with pytest.raises(SourceError) as exc:
        github.parse_pr_url(url)
    assert str(exc.value) == "Give a pull request URL like https://github.com/owner/repo/pull/123."


# --- github_pr -------------------------------------------------------------------------------------
@pytest.fixture
def fake():
    with FakeGitHub(require_token=TOKEN) as gh:
        yield gh


def _demo(fake):
    return fake.add_pr("octo", "demo", 7, title="Fix the thing",
                       base_files={"src/a.py": "x = 1\n", "old.txt": "old\n"},
                       files={"src/a.py": "x = 2\n", "old.txt": None, "new dir/n é.py": "y = 3\n",
                              "img.png": b"\x89PNG\x00\x01"})


def test_github_pr_happy_path(fake):
    pr = _demo(fake)
    url = "https://github.com/octo/demo/pull/7/files"
    src = github.github_pr(url, token=TOKEN, api_url=fake.url + "/")
    assert src.kind == "github"
    assert src.label == "octo/demo#7: Fix the thing"
    assert src.diff_text == pr["diff"]
    assert "+x = 2" in src.diff_text
    assert src.contents == {"src/a.py": "x = 2\n", "old.txt": None, "new dir/n é.py": "y = 3\n",
                            "img.png": None}
    assert src.meta == {"url": url, "owner": "octo", "repo": "demo", "number": 7,
                        "title": "Fix the thing", "head_sha": pr["head_sha"],
                        "base_sha": pr["base_sha"],
                        "html_url": "https://github.com/octo/demo/pull/7", "changed_files": 4}
    for r in fake.requests:
        assert r.headers["authorization"] == f"Bearer {TOKEN}"
        assert r.headers["x-github-api-version"] == "2022-11-28"
        assert r.headers["user-agent"] == "quorum-review"
    by_route = {}
    for r in fake.requests:
        by_route.setdefault(r.route, []).append(r)
    pull = by_route["/repos/octo/demo/pulls/7"]
    assert sorted(r.headers["accept"] for r in pull) == ["application/vnd.github+json",
                                                         "application/vnd.github.diff"]
    files = by_route["/repos/octo/demo/pulls/7/files"]
    assert files[0].query == {"per_page": "100", "page": "1"}
    content = by_route["/repos/octo/demo/contents/new dir/n é.py"][0]
    assert content.headers["accept"] == "application/vnd.github.raw"
    assert content.query == {"ref": pr["head_sha"]}
    assert "/contents/new%20dir/n%20%C3%A9.py?ref=" in content.path
    assert "/repos/octo/demo/contents/old.txt" not in by_route  # removed: not fetched


def test_github_pr_no_token(fake):
    _demo(fake)
    for token in (None, ""):
        with pytest.raises(SourceError) as exc:
            github.github_pr("https://github.com/octo/demo/pull/7", token=token, api_url=fake.url)
        assert str(exc.value).startswith("Set GITHUB_TOKEN to review GitHub pull requests")
    assert fake.requests == []


def test_github_pr_bad_url_checked_before_anything(fake):
    with pytest.raises(SourceError, match="Give a pull request URL"):
        github.github_pr("https://github.com/octo/demo", token=TOKEN, api_url=fake.url)
    assert fake.requests == []


def test_github_pr_wrong_token(fake):
    _demo(fake)
    wrong = "ghp_wrongTOKENvalue999"
    with pytest.raises(SourceError) as exc:
        github.github_pr("https://github.com/octo/demo/pull/7", token=wrong, api_url=fake.url)
    assert "401" in str(exc.value) and "GITHUB_TOKEN" in str(exc.value)
    assert wrong not in str(exc.value) and wrong not in repr(exc.value)


def test_github_pr_token_with_newline_refused_without_echo(fake):
    bad = "ghp_abc\r\nX-Evil: 1"
    with pytest.raises(SourceError) as exc:
        github.github_pr("https://github.com/octo/demo/pull/7", token=bad, api_url=fake.url)
    assert "ghp_abc" not in str(exc.value)
    assert fake.requests == []


def test_github_pr_not_found(fake):
    with pytest.raises(SourceError, match=r"Pull request not found \(or the token cannot see it\)"):
        github.github_pr("https://github.com/octo/demo/pull/8", token=TOKEN, api_url=fake.url)
    _demo(fake)
    fake.fail = "not_found"
    with pytest.raises(SourceError, match="Pull request not found"):
        github.github_pr("https://github.com/octo/demo/pull/7", token=TOKEN, api_url=fake.url)


def test_github_pr_rate_limited(fake):
    _demo(fake)
    fake.fail = "rate_limit"
    fake.rate_limit_reset = 1893456000  # 2030-01-01 00:00:00 UTC
    with pytest.raises(SourceError) as exc:
        github.github_pr("https://github.com/octo/demo/pull/7", token=TOKEN, api_url=fake.url)
    assert "rate limit" in str(exc.value)
    assert "2030-01-01 00:00:00 UTC" in str(exc.value)
    assert TOKEN not in str(exc.value)


def test_github_pr_rate_limited_while_fetching_contents(fake):
    _demo(fake)
    fake.fail, fake.fail_on = "rate_limit", "/contents/"
    with pytest.raises(SourceError, match="rate limit"):
        github.github_pr("https://github.com/octo/demo/pull/7", token=TOKEN, api_url=fake.url)


def test_github_pr_other_status(fake):
    _demo(fake)
    fake.fail = 502
    with pytest.raises(SourceError, match="GitHub answered 502"):
        github.github_pr("https://github.com/octo/demo/pull/7", token=TOKEN, api_url=fake.url)


def test_github_pr_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = f"http://127.0.0.1:{port}"
    with pytest.raises(SourceError) as exc:
        github.github_pr("https://github.com/octo/demo/pull/7", token=TOKEN, api_url=api,
                         timeout=3)
    assert str(exc.value).startswith(f"Could not reach GitHub at {api}: ")
    assert str(exc.value).endswith("(no network?)")
    assert TOKEN not in str(exc.value)


def test_github_pr_pagination_over_100_files(fake):
    files = {f"f{i:03}.txt": f"line {i}\n" for i in range(230)}
    fake.add_pr("octo", "big", 1, files=files)
    src = github.github_pr("https://github.com/octo/big/pull/1", token=TOKEN, api_url=fake.url,
                           max_files=250)
    assert src.contents == files
    pages = [r.query["page"] for r in fake.requests if r.route.endswith("/files")]
    assert pages == ["1", "2", "3"]

    fake.requests.clear()
    src = github.github_pr("https://github.com/octo/big/pull/1", token=TOKEN, api_url=fake.url,
                           max_files=120)
    assert len(src.contents) == 120
    pages = [r.query["page"] for r in fake.requests if r.route.endswith("/files")]
    assert pages == ["1", "2"]
    assert sum("/contents/" in r.route for r in fake.requests) == 120


def test_github_pr_dotdot_path_skipped(fake):
    fake.add_pr("octo", "demo", 9, files={"ok.py": "a = 1\n", "../../etc/passwd": "x\n",
                                          "a/./b.py": "y\n", "/abs.py": "z\n"})
    src = github.github_pr("https://github.com/octo/demo/pull/9", token=TOKEN, api_url=fake.url)
    assert src.contents == {"ok.py": "a = 1\n", "../../etc/passwd": None, "a/./b.py": None,
                            "/abs.py": None}
    assert sorted(src.meta["skipped_paths"]) == ["../../etc/passwd", "/abs.py", "a/./b.py"]
    contents = [r.route for r in fake.requests if "/contents/" in r.route]
    assert contents == ["/repos/octo/demo/contents/ok.py"]


def test_github_pr_diff_truncated_and_big_file_skipped(fake):
    files = {f"m{i}.py": f"v = {i}\n" * 50 for i in range(5)}
    pr = fake.add_pr("octo", "demo", 10, base_files={p: "" for p in files}, files=files)
    first_two = pr["diff"].split("\ndiff --git ")[:2]
    limit = sum(len(p.encode()) for p in first_two) + 30
    src = github.github_pr("https://github.com/octo/demo/pull/10", token=TOKEN,
                           api_url=fake.url, max_bytes=limit, max_file_bytes=100)
    assert src.meta["truncated"] is True and src.meta["truncated_files"] == 3
    assert src.diff_text.count("diff --git ") == 2
    assert pr["diff"].startswith(src.diff_text)
    assert all(v is None for v in src.contents.values())  # each file is 350 bytes > 100


def test_sources_has_no_django_imports():
    import ast
    import pathlib

    modules = sorted(pathlib.Path(sources.__file__).parent.glob("*.py"))
    assert len(modules) == 3
    for module in modules:
        tree = ast.parse(module.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] == "django"], module.name


def test_github_pr_json_accept_fallback_in_fake(fake):
    """The fake also serves GitHub's base64 JSON contents object (for other tests)."""
    import base64

    import httpx

    pr = _demo(fake)
    r = httpx.get(f"{fake.url}/repos/octo/demo/contents/src/a.py",
                  params={"ref": pr["head_sha"]}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert base64.b64decode(r.json()["content"]) == b"x = 2\n"
