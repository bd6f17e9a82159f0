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


def handle(fake, req: Request) -> Answer:
    p = req.parts
    if len(p) < 4 or p[0] != "repos":
        raise KeyError(req.route)
    repo = fake.repos[f"{p[1]}/{p[2]}"]
    kind, rest = p[3], p[4:]
    page = dict(size_key="per_page", default=30, max_size=fake.max_per_page)
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
            c = {"id": next_id(), "body": req.body["body"], "author": "quorum-bot"}
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
        return _review(fake, pull, found, req.body)
    if sub == ["reviews"]:
        return paginate(req, [{"id": r["id"], "state": r["state"], "body": r["body"]}
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


def _review(fake, pull, found: list[Change], body: dict) -> Answer:
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
              "provider": "github"}
    pull.reviews.append(review)
    for c in review["comments"]:
        pull.review_comments.append({
            "id": next_id(), "body": c.get("body"), "author": "quorum-bot", "path": c.get("path"),
            "line": c.get("line"), "side": c.get("side"), "start_line": c.get("start_line"),
            "commit_id": body.get("commit_id"), "review_id": review["id"]})
    return Answer(200, {"id": review["id"], "state": review["state"], "body": review["body"]})
