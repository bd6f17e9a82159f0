"""From the review's rows to what ``hosting.render`` writes: findings as plain dicts, links
to lines on the provider's web pages, the summary's parts."""

from __future__ import annotations

import re
from urllib.parse import quote

from django.conf import settings

from ...hosting import render
from ...models import Finding, Review
from ...pipeline.fingerprint import fingerprint

_WEB_BASE = {
    "github": (re.compile(r"^(https?://[^?#]+?)/pull/\d+/?$"), "{base}/blob/{sha}/{path}#L{line}"),
    "gitlab": (re.compile(r"^(https?://[^?#]+?)/-/merge_requests/\d+/?$"),
               "{base}/-/blob/{sha}/{path}#L{line}"),
    "forgejo": (re.compile(r"^(https?://[^?#]+?)/pulls/\d+/?$"),
                "{base}/src/commit/{sha}/{path}#L{line}"),
}


def as_dict(f: Finding) -> dict:
    d = {"pk": f.pk, "key": f.key, "file": f.file, "line": f.line, "end_line": f.end_line,
         "severity": f.severity, "category": f.category, "title": f.title,
         "description": f.description, "suggestion": f.suggestion,
         "confidence": f.confidence, "rules": f.rules, "fingerprint": f.fingerprint,
         "carried_from": f.carried_from, "resolution": f.resolution,
         "locations": list(f.locations or [])}  # every place a cluster holds
    if not d["fingerprint"]:  # rows from before fingerprints: stable enough per title
        d["fingerprint"] = fingerprint(d, None)
    return d


def line_url(review: Review, head: str):
    """A function giving the provider's web link to a line at ``head``, or None."""
    pr = review.pull_request
    known = _WEB_BASE.get(pr.connection.provider) if pr else None
    m = known[0].match(pr.url or "") if known else None
    if not m or not re.fullmatch(r"[0-9a-fA-F]{7,64}", head or ""):
        return None
    base, template = m.group(1), known[1]

    def url(path: str, line: int) -> str:
        return template.format(base=base, sha=head, path=quote(path, safe="/"), line=line)

    return url


def quorum_url(review: Review) -> str:
    base = (getattr(settings, "QUORUM_PUBLIC_URL", "") or "").rstrip("/")
    return f"{base}{review.get_absolute_url()}" if base else ""


def summary(review: Review, *, triaged: bool, published: list[dict], not_inline: list[str],
            reasons: list[str], event_note: str, head: str) -> render.Summary:
    verdict = review.final_verdict if triaged else review.proposed_verdict
    rows = [(f, as_dict(f)) for f in review.findings.all()]
    chosen = {d["fingerprint"] for d in published}
    carried = [d for f, d in rows if f.kept and d["carried_from"]
               and d["resolution"] != "implemented" and d["fingerprint"] not in chosen]
    resolved = [d for _, d in rows if d["carried_from"] and d["resolution"] == "implemented"]
    who = review.verdict_decided_by.get_username() if review.verdict_decided_by else ""
    return render.Summary(
        verdict=verdict, final=triaged, decided_by=who,
        published=published, not_inline=not_inline, coverage=list(review.coverage or ()),
        reasons=reasons, event_note=event_note, round=review.pr_round,
        base_sha=review.base_sha, from_sha=review.from_sha, head_sha=head,
        carried=carried, resolved=resolved, quorum_url=quorum_url(review),
        line_url=line_url(review, head))
