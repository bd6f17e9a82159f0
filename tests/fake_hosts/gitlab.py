"""The GitLab REST v4 dialect of the fake provider (the subset Quorum calls). Projects are
addressed by their URL-encoded full path (``/projects/octo%2Fdemo/...``)."""

from __future__ import annotations

from .state import Answer, Change, Request, changes, new_lines, next_id, paginate

STATES = {"open": "opened", "closed": "closed", "merged": "merged"}


def _diff(c: Change, patch_limit: int) -> dict:
    d = {"old_path": c.old_path or c.path, "new_path": c.path, "a_mode": "100644",
         "b_mode": "100644", "new_file": c.status == "added",
         "renamed_file": c.status == "renamed", "deleted_file": c.status == "removed",
         "generated_file": False, "too_large": False, "collapsed": False, "diff": c.patch}
    if c.binary:
        d["diff"] = f"Binary files a/{c.old_path or c.path} and b/{c.path} differ\n"
    elif len(c.patch) > patch_limit:
        d.update(diff="", collapsed=True)
    return d


def _note(c: dict, system: bool = False) -> dict:
    d = {"id": c["id"], "body": c["body"], "author": {"username": c["author"]},
         "system": system, "type": None, "noteable_type": "MergeRequest"}
    if "position" in c:
        d.update(type="DiffNote", position=c["position"])
    return d


# GitLab's commit status state machine: a status that is pending or running is the one a post
# changes; a post that would not move it is refused (400 "Cannot transition status via …").
EVENT_OF = {"pending": "enqueue", "running": "run", "success": "success", "failed": "drop",
            "canceled": "cancel"}
ALLOWED = {("created", "pending"), ("created", "running"), ("pending", "running"),
           ("pending", "failed"), ("pending", "canceled"), ("running", "success"),
           ("running", "failed"), ("running", "canceled")}


def _status(repo, sha: str, body: dict, who: str) -> Answer:
    state, name = body.get("state"), body.get("name") or "default"
    if state not in EVENT_OF or sha not in repo.commits:
        return Answer(400, {"message": "400 Bad request - state does not have a valid value"})
    posted = repo.statuses.setdefault(sha, [])
    latest = next((x for x in reversed(posted) if x["context"] == name), None)
    # Only a pending or running status is changed; after a final one a post makes a new one.
    current = latest["state"] if latest and latest["state"] in ("pending", "running") \
        else "created"
    if (current, state) not in ALLOWED:
        return Answer(400, {"message": f"Cannot transition status via :{EVENT_OF[state]} from "
                                       f":{current} (Reason(s): Status cannot transition via "
                                       f"\"{EVENT_OF[state]}\")"})
    entry = {"state": state, "context": name, "description": body.get("description") or "",
             "target_url": body.get("target_url"), "author": who}
    posted.append(entry)
    return Answer(201, {"id": next_id(), "sha": sha, "status": state, "name": name,
                        "description": entry["description"], "author": {"username": who}})


def handle(fake, req: Request) -> Answer:
    p = req.parts
    who = fake.login_for(req)
    if p == ["user"] and req.method == "GET":
        return Answer(200, {"id": 1, "username": fake.bot_login, "bot": True})
    if len(p) < 3 or p[0] != "projects":
        raise KeyError(req.route)
    repo = fake.repos[p[1]]
    page = dict(size_key="per_page", default=20, max_size=fake.max_per_page, gitlab=True)
    if p[2] == "statuses" and len(p) == 4 and req.method == "POST":
        return _status(repo, p[3], req.body or {}, who)
    if p[2:4] == ["repository", "commits"] and len(p) == 6 and p[5] == "statuses":
        return Answer(200, [{"status": x["state"], "name": x["context"],
                             "description": x["description"]}
                            for x in reversed(repo.statuses.get(p[4], []))])
    if p[2] == "repository":
        if p[3:] == ["compare"]:
            found = changes(repo.commits[req.query["from"]], repo.commits[req.query["to"]])
            return Answer(200, {"commits": [], "compare_timeout": False,
                                "diffs": [_diff(c, fake.patch_limit) for c in found]})
        if len(p) == 6 and p[3] == "files" and p[5] == "raw":
            data = repo.commits[req.query.get("ref", "")][p[4]]
            return Answer(200, data, ctype="text/plain; charset=utf-8")
        raise KeyError(req.route)
    if p[2] != "merge_requests" or len(p) < 4 or not p[3].isdigit():
        raise KeyError(req.route)
    pull = repo.pulls[int(p[3])]
    sub = p[4:]
    if not sub:
        return Answer(200, {
            "iid": pull.number, "title": pull.title, "state": STATES[pull.state],
            "draft": pull.draft, "web_url": f"{req.base_url}/{repo.name}/-/merge_requests/"
                                            f"{pull.number}",
            "author": {"username": pull.author}, "source_branch": pull.head_ref,
            "target_branch": pull.base_ref, "sha": pull.head_sha,
            "diff_refs": {"base_sha": pull.base_sha, "start_sha": pull.base_sha,
                          "head_sha": pull.head_sha}})
    if sub == ["diffs"]:
        found = changes(repo.commits[pull.base_sha], repo.commits[pull.head_sha], pull.renames)
        return paginate(req, [_diff(c, fake.patch_limit) for c in found], **page)
    if sub == ["versions"]:
        return Answer(200, [{"id": i + 1, "head_commit_sha": v["head"],
                             "base_commit_sha": v["base"], "start_commit_sha": v["start"]}
                            for i, v in reversed(list(enumerate(pull.versions)))])
    if sub == ["notes"] and req.method == "POST":
        c = {"id": next_id(), "body": req.body["body"], "author": who}
        pull.comments.append(c)
        return Answer(201, _note(c))
    if sub == ["notes"]:
        notes = [_note(c) for c in pull.comments + pull.review_comments]
        notes += [_note({"id": a["id"], "body": f"{a['action']} this merge request",
                         "author": a.get("author", who)}, system=True)
                  for a in pull.approvals]
        return paginate(req, sorted(notes, key=lambda n: n["id"]), **page)
    if len(sub) == 2 and sub[0] == "notes" and req.method == "PUT":
        for c in pull.comments + pull.review_comments:
            if str(c["id"]) == sub[1]:
                c["body"] = req.body["body"]
                return Answer(200, _note(c))
        raise KeyError(sub[1])
    if sub == ["discussions"] and req.method == "POST":
        return _discussion(fake, repo, pull, req.body, who)
    if sub in (["approve"], ["unapprove"]) and req.method == "POST":
        approved = [a for a in pull.approvals if a["action"] == "approved"]
        if sub == ["unapprove"] and not approved:
            raise KeyError("not approved")
        if sub == ["approve"] and approved:
            return Answer(401, {"message": "401 Unauthorized"})  # GitLab: already approved
        if sub == ["unapprove"]:
            pull.approvals.clear()
        else:
            pull.approvals.append({"id": next_id(), "action": "approved",
                                   "sha": (req.body or {}).get("sha")})
        return Answer(201, {"iid": pull.number, "approved": sub == ["approve"]})
    raise KeyError(req.route)


def _discussion(fake, repo, pull, body: dict, who: str) -> Answer:
    pos = body.get("position")
    note = {"id": next_id(), "body": body.get("body"), "author": who}
    if pos is not None:
        need = ("base_sha", "start_sha", "head_sha", "new_path", "position_type")
        if not isinstance(pos, dict) or any(not pos.get(k) for k in need):
            return Answer(400, {"message": "400 Bad request - position is missing fields"})
        version = next((v for v in pull.versions if v["head"] == pos["head_sha"]), None)
        if version is None or (version["base"], version["start"]) != (pos["base_sha"],
                                                                        pos["start_sha"]):
            return Answer(400, {"message": "400 Bad request - Note {:position=>[\"is invalid\"]}"})
        found = changes(repo.commits[version["base"]], repo.commits[version["head"]],
                        pull.renames)
        patch = next((c.patch for c in found if c.path == pos["new_path"]), "")
        if fake.validate_lines and pos.get("new_line") not in new_lines(patch):
            return Answer(400, {"message": "400 Bad request - Note {:line_code=>[\"can't be "
                                           "blank\", \"must be a valid line code\"]}"})
        note["position"] = dict(pos)
        pull.review_comments.append(note)
    else:
        pull.comments.append(note)
    pull.reviews.append({"id": note["id"], "provider": "gitlab", "body": body.get("body"),
                         "position": pos, "state": "discussion"})
    return Answer(201, {"id": f"{note['id']:040x}", "individual_note": False,
                        "notes": [_note(note)]})
