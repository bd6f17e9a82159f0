"""The Forgejo/Gitea REST v1 dialect of the fake provider (the subset Quorum calls). Like the
real one, its file list has no patches: the diff comes from ``/pulls/{n}.diff``."""

from __future__ import annotations

from .state import Answer, Request, changes, new_lines, next_id, paginate, render

EVENTS = {"APPROVED", "REQUEST_CHANGES", "COMMENT"}


def _comment(c: dict) -> dict:
    return {"id": c["id"], "body": c["body"], "user": {"login": c["author"]},
            **({"path": c["path"], "position": c["line"], "original_position": 0,
                "commit_id": c.get("commit_id"), "pull_request_review_id": c["review_id"]}
               if "path" in c else {})}


STATES = {"pending", "success", "error", "failure", "warning"}


def handle(fake, req: Request) -> Answer:
    p = req.parts
    who = fake.login_for(req)
    if p == ["user"] and req.method == "GET":
        return Answer(200, {"id": 1, "login": fake.bot_login, "username": fake.bot_login})
    if len(p) < 4 or p[0] != "repos":
        raise KeyError(req.route)
    repo = fake.repos[f"{p[1]}/{p[2]}"]
    kind, rest = p[3], p[4:]
    page = dict(size_key="limit", default=30, max_size=fake.max_per_page)
    if kind == "statuses" and len(rest) == 1 and req.method == "POST":
        body = req.body or {}
        if body.get("state") not in STATES or rest[0] not in repo.commits:
            return Answer(422, {"message": "invalid state"})
        entry = {"state": body["state"], "context": body.get("context") or "default",
                 "description": body.get("description") or "",
                 "target_url": body.get("target_url"), "author": who}
        repo.statuses.setdefault(rest[0], []).append(entry)
        return Answer(201, {"id": next_id(), "status": entry["state"], **entry})
    if kind == "commits" and len(rest) == 2 and rest[1] == "status":
        latest: dict[str, dict] = {}
        for x in repo.statuses.get(rest[0], []):
            latest[x["context"]] = x
        return Answer(200, {"sha": rest[0], "statuses": [
            {"status": x["state"], "context": x["context"]} for x in latest.values()]})
    if kind == "raw" and req.method == "GET":
        data = repo.commits[req.query.get("ref") or repo.branches.get("main", "")]["/".join(rest)]
        return Answer(200, data, ctype="text/plain; charset=utf-8")
    if kind == "compare" and len(rest) == 1 and "..." in rest[0]:
        base, head = rest[0].split("...", 1)
        found = changes(repo.commits[base], repo.commits[head])
        return Answer(200, {"total_commits": 1, "commits": [{
            "sha": head, "files": [{"filename": c.path, "status": c.status} for c in found]}]})
    if kind == "issues" and rest[:1] == ["comments"] and len(rest) == 2 \
            and req.method == "PATCH":
        for pull in repo.pulls.values():
            for c in pull.comments:
                if str(c["id"]) == rest[1]:
                    c["body"] = req.body["body"]
                    return Answer(200, _comment(c))
        raise KeyError(rest[1])
    if kind not in ("issues", "pulls") or not rest:
        raise KeyError(req.route)
    if kind == "pulls" and rest[0].endswith(".diff") and len(rest) == 1:
        pull = repo.pulls[int(rest[0][:-5])]
        found = changes(repo.commits[pull.base_sha], repo.commits[pull.head_sha], pull.renames)
        return Answer(200, render(found), ctype="text/plain; charset=utf-8")
    pull = repo.pulls[int(rest[0])]
    sub = rest[1:]
    if kind == "issues" and sub == ["comments"]:
        if req.method == "POST":
            c = {"id": next_id(), "body": req.body["body"], "author": who}
            pull.comments.append(c)
            return Answer(201, _comment(c))
        return Answer(200, [_comment(c) for c in pull.comments])  # Gitea: not paginated
    if kind != "pulls":
        raise KeyError(req.route)
    if not sub:
        return Answer(200, {
            "number": pull.number, "title": pull.title, "draft": pull.draft,
            "html_url": f"{req.base_url}/{repo.name}/pulls/{pull.number}",
            "state": "open" if pull.state == "open" else "closed",
            "merged": pull.state == "merged", "user": {"login": pull.author},
            "head": {"sha": pull.head_sha, "ref": pull.head_ref},
            "base": {"sha": pull.base_sha, "ref": pull.base_ref}})
    found = changes(repo.commits[pull.base_sha], repo.commits[pull.head_sha], pull.renames)
    if sub == ["files"]:
        return paginate(req, [{"filename": c.path, "status": c.status,
                               "previous_filename": c.old_path or "",
                               "additions": c.additions, "deletions": c.deletions,
                               "changes": c.additions + c.deletions} for c in found], **page)
    if sub == ["reviews"] and req.method == "POST":
        return _review(fake, pull, found, req.body, who)
    if sub == ["reviews"]:
        return paginate(req, [{"id": r["id"], "state": r["state"], "body": r["body"],
                               "commit_id": r["commit_id"],
                               "user": {"login": r.get("author", "")}}
                              for r in pull.reviews], **page)
    if len(sub) == 3 and sub[0] == "reviews" and sub[2] == "comments":
        return Answer(200, [_comment(c) for c in pull.review_comments
                            if str(c["review_id"]) == sub[1]])
    raise KeyError(req.route)


def _review(fake, pull, found, body: dict, who: str) -> Answer:
    event = body.get("event")
    if event not in EVENTS:
        return Answer(422, {"message": f"unknown review event {event!r}"})
    patches = {c.path: c.patch for c in found}
    for c in body.get("comments") or []:
        if fake.validate_lines and c.get("new_position") not in new_lines(
                patches.get(c.get("path"), "")):
            return Answer(422, {"message": "the line is not part of the diff"})
    review = {"id": next_id(), "state": event, "event": event, "body": body.get("body"),
              "commit_id": body.get("commit_id"), "comments": list(body.get("comments") or []),
              "provider": "forgejo", "author": who}
    pull.reviews.append(review)
    for c in review["comments"]:
        pull.review_comments.append({"id": next_id(), "body": c.get("body"),
                                     "author": who, "path": c.get("path"),
                                     "line": c.get("new_position"), "review_id": review["id"],
                                     "commit_id": body.get("commit_id")})
    return Answer(200, {"id": review["id"], "state": event, "body": review["body"]})
