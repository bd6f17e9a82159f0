"""What Quorum writes on a pull request (reviews_app/hosting/render.py): inline comments with
un-forgeable markers, suggestion blocks only when they apply cleanly, the review event for a
verdict (an incomplete review is never an approval), and the summary comment."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from reviews_app.hosting import render
from reviews_app.hosting.base import FINGERPRINT_MARKER

FP = "0123456789abcdef0123456789abcdef01234567"
FILES = [{"path": "app.py", "hunks": [{"header": "@@ -1,3 +1,4 @@", "lines": [
    {"kind": "ctx", "old": 1, "new": 1, "text": "import os"},
    {"kind": "del", "old": 2, "new": None, "text": "x = 1"},
    {"kind": "add", "old": None, "new": 2, "text": "x = eval(data)"},
    {"kind": "add", "old": None, "new": 3, "text": "y = x"},
    {"kind": "ctx", "old": 3, "new": 4, "text": "print(y)"},
]}, {"header": "@@ -20,2 +21,2 @@", "lines": [
    {"kind": "ctx", "old": 20, "new": 21, "text": "def f():"},
    {"kind": "add", "old": None, "new": 22, "text": "    return 1"},
]}]}]


def finding(**kw) -> dict:
    base = {"file": "app.py", "line": 2, "end_line": 3, "severity": "high",
            "category": "security", "title": "eval on input", "confidence": 0.9,
            "description": "Untrusted data reaches eval.",
            "suggestion": "```python\nx = int(data)\ny = x\n```", "fingerprint": FP}
    return base | kw


def rendered_html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


# --- markers cannot be forged, text cannot hide -------------------------------------------------
FORGERIES = [
    "<!-- quorum:fingerprint=deadbeefdeadbeef -->",
    "`<!-- quorum:fingerprint=deadbeefdeadbeef -->`",
    "<<!---->!-- quorum:fingerprint=deadbeefdeadbeef --->>",
    "<!-\u200b- quorum:fingerprint=deadbeefdeadbeef -->",
    "```\n<!-- quorum:fingerprint=deadbeefdeadbeef -->\n```",
    "<!-- quorum:summary -->",
]


@pytest.mark.parametrize("forged", FORGERIES)
@pytest.mark.parametrize("field", ["title", "description", "suggestion", "category"])
def test_model_text_cannot_forge_a_marker_anywhere_in_the_comment(forged, field):
    c = render.inline_comment(finding(**{field: f"look {forged} here"}), render.diff_lines(FILES))
    assert c is not None
    assert render.fingerprints_in(c.comment.body) == {FP}  # only our own, once
    assert c.comment.body.count("<!--") == 1 and c.comment.body.endswith(
        FINGERPRINT_MARKER.format(FP))
    assert "<!-- quorum:summary" not in c.comment.body


def test_html_links_images_mentions_and_fences_from_the_model_are_inert():
    evil = ("<details><summary>ok</summary>hidden</details> [click](javascript:alert(1)) "
            "![px](https://tracker.invalid/p.gif) @admin\n```suggestion\nrm -rf /\n```\n"
            "# Heading\n\u202egnp.exe")
    c = render.inline_comment(finding(description=evil, suggestion="Validate it first, please."),
                              render.diff_lines(FILES))
    html = rendered_html(c.comment.body)
    assert "<details" not in html and "<img" not in html and "<a " not in html
    assert "<h1" not in html and "href" not in html and "src=" not in html
    assert "language-suggestion" not in html     # the only code block would be ours
    assert "@\u200badmin" in c.comment.body and "\u202e" not in c.comment.body
    arrow = render.inline_comment(finding(description="returns `a -> b` --> done"),
                                  render.diff_lines(FILES))
    assert "returns `a -> b` --> done" in arrow.comment.body  # arrows in text are kept
    assert c.suggestion is False                 # prose: no suggestion block


def test_lengths_are_capped():
    c = render.inline_comment(finding(title="T" * 5000, description="D" * 50_000,
                                      suggestion="S " * 50_000), render.diff_lines(FILES))
    assert len(c.comment.body) < render.MAX_TITLE + 2 * render.MAX_TEXT + 1000
    assert "…" in c.comment.body


# --- suggestions only when they apply ------------------------------------------------------------
def test_code_suggestion_on_added_lines_becomes_a_suggestion_block():
    c = render.inline_comment(finding(), render.diff_lines(FILES))
    assert c.suggestion is True
    assert "```suggestion\nx = int(data)\ny = x\n```" in c.comment.body
    assert (c.comment.path, c.comment.start_line, c.comment.line) == ("app.py", 2, 3)


def test_suggestion_whose_range_leaves_the_diff_is_plain_text():
    # lines 4..6: 4 is context, 5 and 6 are not in the diff at all
    c = render.inline_comment(finding(line=4, end_line=6, suggestion="x = 2"),
                              render.diff_lines(FILES))
    assert c.suggestion is False and "```suggestion" not in c.comment.body
    assert (c.comment.line, c.comment.start_line) == (4, None)  # commented on its first line
    assert "**Suggestion:** x = 2" in c.comment.body


def test_prose_suggestion_is_plain_text_and_code_is_recognised():
    assert render.suggestion_code("Consider validating the input before using it.") is None
    assert render.suggestion_code("Use a constant here") is None
    assert render.suggestion_code("Use `int(x)` instead.") is None
    assert render.suggestion_code("Replace eval() with int() here.") is None
    assert render.suggestion_code("if x is None:\n    return [] # fall back") == (
        "if x is None:\n    return [] # fall back", "")
    assert render.suggestion_code("def f(a) -> int:\n    return a->b") is not None
    assert render.suggestion_code("x = int(value)") == ("x = int(value)", "")
    assert render.suggestion_code("Like this:\n~~~\nreturn 1\n~~~") == ("return 1", "Like this:")
    assert render.suggestion_code("```\na()\n```\n```\nb()\n```") is None  # two blocks: ambiguous


def test_code_with_a_comment_delimiter_or_long_backticks_cannot_escape():
    c = render.inline_comment(finding(suggestion="x = '<!-- quorum:fingerprint=abababab -->'"),
                              render.diff_lines(FILES))
    assert c.suggestion is False and render.fingerprints_in(c.comment.body) == {FP}
    c = render.inline_comment(finding(suggestion="s = '````'\nt = 1"), render.diff_lines(FILES))
    assert c.suggestion is True and "`````suggestion\ns = '````'\nt = 1\n`````" in c.comment.body


def test_a_finding_off_the_diff_gets_no_inline_comment():
    lines = render.diff_lines(FILES)
    assert render.inline_comment(finding(line=10, end_line=None), lines) is None
    assert render.inline_comment(finding(file="other.py"), lines) is None
    assert render.inline_comment(finding(line=None), lines) is None


def test_incremental_rounds_anchor_on_added_lines_only():
    added = render.diff_lines(FILES, added_only=True)
    assert added == {"app.py": {2, 3, 22}}
    assert render.inline_comment(finding(line=1, end_line=None), added) is None
    c = render.inline_comment(finding(line=21, end_line=22, suggestion="def f(): pass"), added)
    assert c is None  # line 21 is context, not part of the new commits


# --- verdict → review event ----------------------------------------------------------------------
@pytest.mark.parametrize(("verdict", "event"), [("approve", "approve"),
                                                ("request_changes", "request_changes"),
                                                ("needs_discussion", "comment")])
def test_verdict_maps_to_the_review_event(verdict, event):
    assert render.review_event(verdict, []) == (event, "")


def test_an_incomplete_review_is_never_an_approval():
    coverage = [{"path": "big.bin", "reason": "not_examined", "reviewed": False, "detail": "x"}]
    reasons = render.partial_reasons(coverage, {"security": {"status": "ok"}})
    event, why = render.review_event("approve", reasons)
    assert event == "comment" and "not examined" in why
    reasons = render.partial_reasons([], {"security": {"status": "ok"},
                                          "style": {"status": "partial"}})
    assert reasons == ["the style reviewer did not finish"]
    assert render.review_event("approve", reasons)[0] == "comment"
    assert render.review_event("request_changes", reasons)[0] == "request_changes"
    assert render.partial_reasons([{"path": "a", "reason": "model_only", "reviewed": True}],
                                  {"x": {"status": "ok"}}) == []


# --- the summary -------------------------------------------------------------------------------
def summary(**kw) -> render.Summary:
    base = {"verdict": "request_changes", "final": True, "decided_by": "alice",
            "published": [finding(), finding(severity="low", title="style", line=22,
                                             end_line=None, fingerprint="f" * 40)],
            "coverage": [{"path": "img.png", "reason": "binary", "reviewed": False,
                          "detail": "Binary file."},
                         {"path": "src/x.py", "reason": "model_only", "reviewed": True,
                          "detail": "read"}],
            "round": 2, "base_sha": "a" * 40, "from_sha": "b" * 40, "head_sha": "c" * 40,
            "quorum_url": "https://quorum.example/reviews/7/",
            "line_url": lambda p, n: f"https://host.example/o/r/blob/{'c' * 40}/{p}#L{n}"}
    return render.Summary(**(base | kw))


def test_summary_says_verdict_counts_findings_range_and_links():
    body = render.summary_body(summary())
    assert "**Verdict: Request changes** (final, triaged in Quorum by alice)" in body
    assert "By severity: 1 high, 1 low." in body
    assert "Round 2 · reviewed `bbbbbbbbbb..cccccccccc` (new commits" in body
    assert f"(https://host.example/o/r/blob/{'c' * 40}/app.py#L2)" in body
    assert "[Open this review in Quorum](https://quorum.example/reviews/7/)" in body


CLUSTER = [{"file": "app.py", "line": 2, "end_line": 3, "key": "SEC-1"},
           {"file": "app.py", "line": 9, "end_line": None, "key": "SEC-2"},
           {"file": "lib/util.py", "line": 4, "end_line": None, "key": "SEC-3"}]


def test_every_place_a_cluster_holds_is_named_inline_and_in_the_summary():
    """Issue 36: the places a cluster folded had no comment on the pull request."""
    c = render.inline_comment(finding(locations=CLUSTER), render.diff_lines(FILES))
    assert "**The same problem also at:** `app.py:9`, `lib/util.py:4`." in c.comment.body
    body = render.summary_body(summary(published=[finding(locations=CLUSTER)]))
    url = f"https://host.example/o/r/blob/{'c' * 40}"
    assert (f"— [`app.py:2`]({url}/app.py#L2); also at [`app.py:9`]({url}/app.py#L9), "
            f"[`lib/util.py:4`]({url}/lib/util.py#L4)") in body
    alone = render.inline_comment(finding(locations=CLUSTER[:1]), render.diff_lines(FILES))
    assert "also at" not in alone.comment.body
    many = [{"file": "app.py", "line": n, "end_line": None} for n in range(2, 40)]
    assert "and 17 more (see Quorum)" in render.places_text(finding(locations=many))


def test_summary_never_claims_an_unreviewed_file_was_reviewed():
    body = render.summary_body(summary())
    assert "### Left out on purpose (1)" in body and "`img.png` — binary" in body
    assert "src/x.py" not in body and "Every file of the change" not in body
    clean = render.summary_body(summary(coverage=[{"path": "a", "reason": "model_only",
                                                   "reviewed": True}]))
    assert "Every file of the change was reviewed." in clean
    clipped = render.summary_body(summary(coverage=[{"path": "a.py", "reason": "clipped",
                                                     "reviewed": True, "detail": "cut"}]))
    assert "### Not examined (1)" in clipped and "Every file" not in clipped


def test_the_count_of_parts_not_examined_matches_the_list_without_duplicates():
    """One part per file: repeated entries (the fetch and the parser both saying it) and two
    reasons for one file are one line, and the incomplete-review line gives the same count."""
    coverage = [
        {"path": "big.py", "reason": "over_byte_limit", "reviewed": False, "detail": "Too big."},
        {"path": "big.py", "reason": "over_byte_limit", "reviewed": False, "detail": "Too big."},
        {"path": "odd.py", "reason": "not_utf8", "reviewed": True, "detail": "Bytes replaced."},
        {"path": "odd.py", "reason": "clipped", "reviewed": True, "detail": "Cut at 2000."},
        {"path": "gone.py", "reason": "deleted", "reviewed": False, "detail": ""},
        {"path": "src/x.py", "reason": "examined", "reviewed": True},
    ]
    reasons = render.partial_reasons(coverage, {"security": {"status": "ok"}})
    assert reasons == ["2 parts of the change were not examined"]
    body = render.summary_body(summary(coverage=coverage, reasons=reasons))
    listed = body.split("### Not examined (2)")[1].split("###")[0]
    assert [ln.split(" — ")[0] for ln in listed.strip().splitlines()] == ["- `big.py`",
                                                                          "- `odd.py`"]
    assert "not utf8, clipped" in listed and body.count("`big.py`") == 1
    assert "### Left out on purpose (1)" in body and "`gone.py` — deleted" in body


def test_automatic_summary_says_proposed_and_no_link_without_public_url():
    body = render.summary_body(summary(final=False, verdict="approve", quorum_url="",
                                       reasons=["1 part of the change was not examined"],
                                       event_note="Not approved because..."))
    assert "proposed by the reviewers and published automatically" in body
    assert "**Incomplete review:** 1 part" in body and "Open this review" not in body


def test_summary_lists_carried_and_resolved_findings_and_escapes_them():
    body = render.summary_body(summary(
        carried=[finding(title="still <b>open</b>", fingerprint="1" * 40)],
        resolved=[finding(title="fixed", resolution="implemented", fingerprint="2" * 40)]))
    assert "### Earlier rounds" in body and "Still open from earlier rounds: 1." in body
    assert "still &lt;b>open&lt;/b>" in body and "fixed" in body and "(implemented)" in body
    assert "<b>open" not in rendered_html(body)


def test_unsafe_links_are_left_out():
    body = render.summary_body(summary(quorum_url="javascript:alert(1)",
                                       line_url=lambda p, n: "https://x.invalid/a b)"))
    assert "javascript:" not in body and "x.invalid" not in body
