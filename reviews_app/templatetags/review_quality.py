"""The quality stages on the review page: per-stage counts, the severity rubric, a finding's
trail in words and links to its further locations (see pipeline/quality/)."""

from __future__ import annotations

from django import template

from ..pipeline.quality import rubric, summary

register = template.Library()


@register.inclusion_tag("reviews_app/_quality_summary.html")
def quality_summary(kept, dropped) -> dict:
    return {"lines": summary.stage_lines(list(kept or ()), list(dropped or ())),
            "rubric": rubric.RUBRIC_LEVELS, "kinds": rubric.KIND_TEXT}


@register.filter
def quality_action(entry) -> str:
    return summary.action_text(entry) if isinstance(entry, dict) else ""


@register.filter
def quality_changes(entry) -> list:
    return summary.changes(entry) if isinstance(entry, dict) else []


def _shown(context, files) -> dict:
    """path -> (index, new lines shown in the diff), computed once per page render."""
    cache = context.render_context
    if "quality_shown" not in cache:
        cache["quality_shown"] = {
            f["path"]: (i, {ln["new"] for h in f.get("hunks") or () for ln in h["lines"]
                            if ln.get("new") is not None and ln.get("kind") != "del"})
            for i, f in enumerate(files or ())}
    return cache["quality_shown"]


@register.simple_tag(takes_context=True)
def other_locations(context, finding, files) -> list[dict]:
    """A finding's further locations (not its own place), each with the text and the anchor
    of the diff line (or file) it points at, like the finding's own link."""
    own = (finding.file, finding.line, finding.end_line)
    shown = _shown(context, files)
    out = []
    for loc in finding.locations or ():
        if not isinstance(loc, dict) or not loc.get("file"):
            continue
        path, line, end = str(loc["file"]), loc.get("line"), loc.get("end_line")
        if (path, line, end) == own:
            continue
        where = path if not line else (f"{path}:{line}" + (f"-{end}" if end and end > line
                                                           else ""))
        index, lines = shown.get(path, (None, set()))
        anchor = "" if index is None else (f"f{index}-L{line}" if line in lines
                                           else f"file-{index}")
        out.append({"where": where, "anchor": anchor, "key": str(loc.get("key") or "")})
    return out
