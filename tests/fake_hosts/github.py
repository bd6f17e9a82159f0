"""The GitHub REST v3 dialect of the fake provider (the subset Quorum calls)."""

from __future__ import annotations

import base64

from .state import Answer, Change, Request, changes, make_diff, new_lines, next_id, paginate


def _file(c: Change, patch_limit: int, status: str | None = None) -> dict:
    d = {"filename": c.path, "status": status or c.status, "additions": c.additions,
         "deletions": c.deletions, "changes": c.additions + c.deletions,
         "sha": f"{abs(hash(c.path)):040x}"[:40]}
    if c.old_path:
        d["previous_filename"] = c.old_path
    if c.patch and len(c.patch) <= patch_limit:
        d["patch"] = c.patch   # GitHub leaves it out of binary and very large files
    return d


def _comment(c: dict) -> dict:
    return {"id": c["id"], "body": c["body"], "user": {"login": c["author"]},
            **{k: c[k] for k in ("path", "line", "side", "start_line", "commit_id")
               if k in c}}


STATES = {"pending", "success", "failure", "error"}
CHECK_STATUSES = {"queued", "in_progress", "completed"}
CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped",
               "stale", "timed_out"}


def handle(fake, req: Request) -> Answer:
    p = req.parts
    inst = fake.installation_of(req)
    if p == ["user"] and req.method == "GET":
        if inst is not None:  # an installation token has no user
            return Answer(403, {"message": "Resource not accessible by integration"})
        return Answer(200, {"login": fake.bot_login, "id": 1, "type": "User"})
    if len(p) < 4 or p[0] != "repos":
        raise KeyError(req.route)
    if inst is not None and f"{p[1]}/{p[2]}" not in inst["repos"]:
        raise KeyError(req.route)  # not installed there: 404, as GitHub answers
    repo = fake.repos[f"{p[1]}/{p[2]}"]
    kind, rest = p[3], p[4:]
    page = dict(size_key="per_page", default=30, max_size=fake.max_per_page)
    who = fake.login_for(req)
    if kind == "statuses" and len(rest) == 1 and req.method == "POST":
        body = req.body or {}
        if body.get("state") not in STATES or rest[0] not in repo.commits:
            return Answer(422, {"message": "Validation Failed"})
        entry = {"state": body["state"], "context": body.get("context") or "default",
                 "description": body.get("description") or "",
                 "target_url": body.get("target_url"), "author": who}
        repo.statuses.setdefault(rest[0], []).append(entry)
        return Answer(201, {"id": next_id(), **entry})
    if kind == "commits" and len(rest) == 2 and rest[1] == "status":
        latest: dict[str, dict] = {}
        for x in repo.statuses.get(rest[0], []):
            latest[x["context"]] = x
        return Answer(200, {"sha": rest[0], "statuses": list(latest.values())})
    if kind == "commits" and len(rest) == 2 and rest[1] == "check-runs":
        runs = [c for c in repo.check_runs if c["head_sha"] == rest[0]
                and req.query.get("check_name") in (None, c["name"])]
        return Answer(200, {"total_count": len(runs), "check_runs": [_run(c) for c in runs]})
    if kind == "check-runs":
        return _check_run(fake, repo, inst, rest, req, who)
    if kind == "contents" and req.method == "GET":
        tree = repo.commits[req.query.get("ref") or repo.branches.get("main", "")]
        data = tree["/".join(rest)]
        data = data if isinstance(data, bytes) else data.encode("utf-8")
        if "application/vnd.github.raw" in req.headers.get("accept", ""):
            return Answer(200, data, ctype="application/vnd.github.raw")
        return Answer(200, {"type": "file", "path": "/".join(rest), "encoding": "base64",
                            "size": len(data), "content": base64.b64encode(data).decode()})
    if kind == "compare" and len(rest) == 1 and "..." in rest[0]:
        base, head = rest[0].split("...", 1)
        found = changes(repo.commits[base], repo.commits[head])
        return Answer(200, {"status": "ahead", "total_commits": 1, "commits": [],
                            "files": [_file(c, fake.patch_limit) for c in found]})
    if kind == "issues" and rest[:1] == ["comments"] and len(rest) == 2 \
            and req.method == "PATCH":
        for pull in repo.pulls.values():
            for c in pull.comments:
                if str(c["id"]) == rest[1]:
                    c["body"] = req.body["body"]
                    return Answer(200, _comment(c))
        raise KeyError(rest[1])
    if kind not in ("issues", "pulls") or not rest or not rest[0].isdigit():
        raise KeyError(req.route)
    pull = repo.pulls[int(rest[0])]
    sub = rest[1:]
    if kind == "issues" and sub == ["comments"]:
        if req.method == "POST":
            c = {"id": next_id(), "body": req.body["body"], "author": who}
            pull.comments.append(c)
            return Answer(201, _comment(c))
        return paginate(req, [_comment(c) for c in pull.comments], **page)
    if kind != "pulls":
        raise KeyError(req.route)
    if not sub and req.method == "GET":
        return _pull(fake, repo, pull, req)
    found = changes(repo.commits[pull.base_sha], repo.commits[pull.head_sha], pull.renames)
    if sub == ["files"]:
        return paginate(req, [_file(c, fake.patch_limit, pull.statuses.get(c.path))
                              for c in found], **page)
    if sub == ["comments"]:
        return paginate(req, [_comment(c) for c in pull.review_comments], **page)
    if sub == ["reviews"] and req.method == "POST":
        return _review(fake, pull, found, req.body, who)
    if sub == ["reviews"]:
        return paginate(req, [{"id": r["id"], "state": r["state"], "body": r["body"],
                               "user": {"login": r.get("author", "")},
                               "commit_id": r["commit_id"]}
                              for r in pull.reviews], **page)
    raise KeyError(req.route)


def _pull(fake, repo, pull, req: Request) -> Answer:
    if "application/vnd.github.diff" in req.headers.get("accept", ""):
        diff = pull.diff if pull.diff is not None else make_diff(
            repo.commits[pull.base_sha], {**{k: None for k in repo.commits[pull.base_sha]},
                                          **repo.commits[pull.head_sha]})
        return Answer(200, diff, ctype="text/plain; charset=utf-8")
    html = f"https://github.com/{repo.name}/pull/{pull.number}"
    found = changes(repo.commits[pull.base_sha], repo.commits[pull.head_sha], pull.renames)
    return Answer(200, {
        "number": pull.number, "title": pull.title, "html_url": html,
        "state": "open" if pull.state == "open" else "closed", "draft": pull.draft,
        "merged": pull.state == "merged", "user": {"login": pull.author},
        "head": {"sha": pull.head_sha, "ref": pull.head_ref},
        "base": {"sha": pull.base_sha, "ref": pull.base_ref},
        "changed_files": len(found)})


EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


def _run(c: dict) -> dict:
    return {k: c[k] for k in ("id", "name", "head_sha", "status", "conclusion", "output",
                              "details_url")} | {"app": {"slug": c["author"][:-5]}}


def _check_run(fake, repo, inst, rest: list[str], req: Request, who: str) -> Answer:
    """Check runs: written only by a GitHub App (a personal token gets 403)."""
    if inst is None:
        return Answer(403, {"message": "You must authenticate via a GitHub App.",
                            "documentation_url": "https://docs.github.com/rest/checks/runs"})
    body = req.body or {}
    status = body.get("status", "queued")
    if status not in CHECK_STATUSES or (status == "completed") != bool(body.get("conclusion")) \
            or (body.get("conclusion") and body["conclusion"] not in CONCLUSIONS):
        return Answer(422, {"message": "Validation Failed",
                            "errors": ["status and conclusion do not go together"]})
    if len(str((body.get("output") or {}).get("summary") or "")) > 65535:
        return Answer(422, {"message": "Validation Failed", "errors": ["summary too long"]})
    step = f"completed:{body['conclusion']}" if status == "completed" else status
    if not rest and req.method == "POST":
        if not body.get("name") or body.get("head_sha") not in repo.commits:
            return Answer(422, {"message": "Validation Failed"})
        run = {"id": next_id(), "name": body["name"], "head_sha": body["head_sha"],
               "status": status, "conclusion": body.get("conclusion"),
               "output": body.get("output") or {}, "details_url": body.get("details_url"),
               "author": who, "history": [step]}
        repo.check_runs.append(run)
        return Answer(201, _run(run))
    if len(rest) == 1 and req.method == "PATCH":
        run = next((c for c in repo.check_runs if str(c["id"]) == rest[0]), None)
        if run is None:
            raise KeyError(rest[0])
        run.update(status=status, conclusion=body.get("conclusion"),
                   output=body.get("output") or run["output"])
        run["history"].append(step)
        return Answer(200, _run(run))
    raise KeyError(req.route)


def _review(fake, pull, found: list[Change], body: dict, who: str) -> Answer:
    event = body.get("event")
    if event not in EVENTS:
        return Answer(422, {"message": "Unprocessable Entity",
                            "errors": [f"event {event!r} is not one of {sorted(EVENTS)}"]})
    patches = {c.path: c.patch for c in found}
    for c in body.get("comments") or []:
        lines = new_lines(patches.get(c.get("path"), ""))
        wanted = [c.get("line")] + ([c["start_line"]] if c.get("start_line") else [])
        if fake.validate_lines and not all(n in lines for n in wanted):
            return Answer(422, {"message": "Unprocessable Entity",
                                "errors": ["Line could not be resolved"]})
    review = {"id": next_id(), "state": EVENTS[event], "event": event, "body": body.get("body"),
              "commit_id": body.get("commit_id"), "comments": list(body.get("comments") or []),
              "provider": "github", "author": who}
    pull.reviews.append(review)
    for c in review["comments"]:
        pull.review_comments.append({
            "id": next_id(), "body": c.get("body"), "author": who, "path": c.get("path"),
            "line": c.get("line"), "side": c.get("side"), "start_line": c.get("start_line"),
            "commit_id": body.get("commit_id"), "review_id": review["id"]})
    return Answer(200, {"id": review["id"], "state": review["state"], "body": review["body"]})
