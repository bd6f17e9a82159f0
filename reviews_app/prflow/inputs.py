"""What one round of a pull request's review is made of: the repository's ``.quorum.toml``
(from the base commit), the diff with the configured paths left out, the mode by path, the
findings a person rejected earlier for this repository and the open findings of the round
before."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from ..hosting import repo_config
from ..hosting.base import HostClient, HostError
from ..models import Connection, Finding, RejectReason, Review
from ..pipeline.diffs.paths import quick_path
from ..pipeline.diffs.text import normalise_text, split_chunks
from ..pipeline.pattern.helpers import code_lookup
from ..services import ROLES

EXCLUDED = "excluded"
EXCLUDED_DETAIL = "Excluded by .quorum.toml (read from the base branch): not reviewed."
EARLIER = "earlier_round"
MAX_SUPPRESSED = 5000


def allowed_models() -> set[str]:
    """Models a repository may ask for: the server's role models and QUORUM_REPO_MODELS."""
    return set(settings.QUORUM_ROLE_MODELS.values()) | set(settings.QUORUM_REPO_MODELS)


def read_config(client: HostClient, base_sha: str) -> tuple[repo_config.RepoConfig, list[str]]:
    """``.quorum.toml`` at the pull request's *base* commit: its head is the author's to
    change, so a pull request cannot turn its own review off. A file the provider will not
    give (too large, unreadable) means the defaults, saying so; only a retryable provider
    error is raised (the delivery is tried again)."""
    try:
        data = client.file_bytes(base_sha, repo_config.PATH, max_bytes=repo_config.MAX_BYTES)
    except HostError as exc:
        if exc.retryable:
            raise
        return repo_config.RepoConfig(), [
            f"{repo_config.PATH} could not be read from the base branch ({exc}); the defaults "
            "apply."]
    return repo_config.load(data, allowed_models=allowed_models(), roles=ROLES)


def split_diff(diff_text: str, keep: Callable[[str], bool]) -> tuple[str, list[str]]:
    """The diff without the files ``keep`` refuses, and the refused paths."""
    text = normalise_text(diff_text or "")
    chunks = split_chunks(text)
    if not chunks:
        return text, []
    kept, dropped = [text[:chunks[0].start]], []
    for chunk in chunks:
        path = quick_path(text, chunk)
        if path and not keep(path):
            dropped.append(path)
        else:
            kept.append(text[chunk.start:chunk.end])
    return "".join(kept), dropped


def apply_paths(cfg: repo_config.RepoConfig, diff_text: str, contents: dict,
                coverage: list[dict]) -> tuple[str, dict, list[dict]]:
    """Leave out what ``[review] include/exclude`` leaves out: each such file becomes a
    coverage entry "excluded by .quorum.toml" (``reviewed: False``)."""
    text, dropped = split_diff(diff_text, cfg.included)
    gone = set(dropped)
    for c in coverage:
        path = c.get("path") if isinstance(c, dict) else None
        if path and path not in gone and not path.startswith("(") and not cfg.included(path):
            gone.add(path)
    cov = [c for c in coverage if not (isinstance(c, dict) and c.get("path") in gone)]
    cov += [{"path": p, "reason": EXCLUDED, "reviewed": False, "detail": EXCLUDED_DETAIL}
            for p in sorted(gone)]
    return text, {p: v for p, v in (contents or {}).items() if p not in gone}, cov


def nothing_left(diff_text: str, coverage: list[dict]) -> str:
    """Why a round has no diff to review."""
    excluded = sum(1 for c in coverage if c.get("reason") == EXCLUDED)
    if excluded and (diff_text or "").strip():
        return (f"every changed file ({excluded}) is excluded by .quorum.toml (read from the "
                "base branch).")
    return "no file of the pull request changed in these commits."


def apply_modes(cfg: repo_config.RepoConfig, files: list[dict]) -> None:
    """``[review] light/heavy`` by path: light reads the diff only; heavy the whole file too,
    where its text is known."""
    for f in files:
        mode = cfg.mode_for(f["path"])
        if mode == "light" or (mode == "heavy" and f.get("content") is not None):
            f["mode"] = mode


def earlier_round(previous: Review, from_sha: str, head_sha: str, round_no: int) -> dict:
    return {"path": "(rest of the pull request)", "reason": EARLIER, "reviewed": True,
            "detail": f"Round {round_no} reviews only the commits from {from_sha[:7]} to "
                      f"{head_sha[:7]}; the rest of the pull request was reviewed in round "
                      f"{previous.pr_round} (review {previous.run_id})."}


# --- earlier decisions and rounds --------------------------------------------------------------------
def suppressed(conn: Connection) -> list[dict]:
    """Fingerprints a person rejected in any review of this repository's pull requests."""
    labels = dict(RejectReason.choices)
    rows = (Finding.objects.filter(review__pull_request__connection=conn,
                                   decision=Finding.Decision.REJECTED)
            .exclude(fingerprint="").order_by("-id")
            .values("fingerprint", "key", "review__run_id", "reject_reason", "comment")
            [:MAX_SUPPRESSED])
    out, seen = [], set()
    for r in rows:
        if r["fingerprint"] in seen:
            continue
        seen.add(r["fingerprint"])
        why = [str(labels.get(r["reject_reason"], "")).lower(), " ".join(r["comment"].split())]
        out.append({"fingerprint": r["fingerprint"], "review": r["review__run_id"],
                    "key": r["key"], "reason": ": ".join(w for w in why if w)[:300]})
    return out


_CARRIED = ("key", "category", "severity", "file", "line", "end_line", "title", "description",
            "suggestion", "confidence", "rules", "reviewer", "reviewers", "history",
            "fingerprint")


def carried(previous: Review | None) -> list[dict]:
    """The open findings of the round before (kept, not rejected, not resolved), each with
    the code it pointed at then and, when a person accepted it, that decision: the next
    round keeps it while the code is untouched, so nobody triages the same finding twice."""
    if previous is None:
        return []
    code_at = code_lookup((previous.run.state or {}).get("files") or [])
    out = []
    rows = (previous.findings.filter(kept=True).exclude(decision=Finding.Decision.REJECTED)
            .select_related("decided_by"))
    for f in rows.exclude(resolution="implemented").order_by("position"):
        d = {k: getattr(f, k) for k in _CARRIED}
        d["review"] = previous.run_id
        d["code"] = code_at(f.file, f.line, f.end_line) or ""
        if f.decision == Finding.Decision.ACCEPTED:
            d["decision"] = {"decision": f.decision, "by": f.decided_by_id,
                             "by_name": f.decided_by.get_username() if f.decided_by else "",
                             "at": f.decided_at.isoformat() if f.decided_at else "",
                             "comment": f.comment[:1000], "round": previous.pr_round}
        out.append(d)
    return out
