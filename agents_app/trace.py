"""The trace of a run as people read it: stage names in words, and each model call's prompt and
reply with secrets blanked and JSON indented."""

from __future__ import annotations

import json
import re

from .llm.gateway import redact

# Stage names are keys such as ``step:2:0`` or ``organize:1``: a kind, then numbers. Each
# pattern's kinds in words; ``{0}``, ``{1}`` are the numbers after the kind.
_STAGES: dict[str, dict[str, str]] = {
    "plan_execute": {"start": "Getting started", "plan": "Planning (plan v{0})",
                     "step": "Step {1+} of plan v{0}", "synthesize": "Final answer",
                     "direct": "Direct answer"},
    "plan_execute_review": {"setup": "Setting up the branch", "plan": "Planning (plan v{0})",
                            "execute": "Round {1}: changing the code (plan v{0})",
                            "review": "Round {1}: review (plan v{0})", "merge": "Merging",
                            "close": "Closing"},
    "reflective": {"draft": "Draft {0}", "critique": "Critique of draft {0}"},
    "debate": {"round": "Round {0}", "judge": "Judge's conclusion"},
    "team_lead": {"delegate": "Splitting the task", "work": "Team work, batch {0}",
                  "review": "Lead's review of batch {0}", "synthesize": "Final answer"},
    "rewoo": {"sketch": "Planning the tool calls", "work": "Running the tool calls",
              "organize": "Answer, draft {0}", "verify": "Checking draft {0}"},
    "react": {"step": "Iteration {0}", "act": "Iteration {0}: tool call",
              "final": "Final answer"},
    "code_review": {"analyze": "Analyzers", "review": "Reviewers", "reflect":
                    "Reviewers reading each other's findings", "synthesize": "Verdict",
                    "close": "Closing"},
}
_NUMBER = re.compile(r"\{(\d)(\+?)\}")


def stage_label(pattern: str, stage: str) -> str:
    """``stage`` of a run of ``pattern`` in words: ``step:2:0`` → "Step 1 of plan v2"."""
    kind, *args = [part for part in (stage or "").split(":")]
    args = [a for a in args if a]
    template = _STAGES.get(pattern, {}).get(kind)
    if template is None or len(_NUMBER.findall(template)) > len(args):
        words = kind.replace("_", " ").capitalize() or "Stage"
        return " ".join([words, *args])

    def number(m: re.Match) -> str:
        value = args[int(m.group(1))]
        # ``{1+}``: a zero-based index shown counted from one.
        return str(int(value) + 1) if m.group(2) and value.isdigit() else value

    return _NUMBER.sub(number, template)


def readable(text: str) -> tuple[str, bool]:
    """``text`` for a person: JSON indented (a fenced JSON block too), then secrets blanked.
    Returns the text and whether it was JSON. The template escapes it."""
    body = (text or "").strip()
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*)\n```", body, re.S)
    try:
        value = json.loads(fenced.group(1) if fenced else body)
    except ValueError:
        return redact(text or ""), False
    if not isinstance(value, (dict, list)):
        return redact(text or ""), False
    return redact(json.dumps(value, indent=2, ensure_ascii=False)), True


# A message longer than this is folded (<details>) so the page stays readable.
FOLD_CHARS = 1500


def call_io(call) -> dict:
    """What the trace shows of one ``ModelCall``: its messages and its reply."""
    messages = []
    for m in call.messages or []:
        content = m.get("content")
        text, is_json = readable(content if isinstance(content, str)
                                 else json.dumps(content, ensure_ascii=False, default=str))
        messages.append({"role": str(m.get("role") or "message"), "text": text,
                         "json": is_json, "fold": len(text) > FOLD_CHARS})
    reply, reply_json = readable(call.response)
    return {"prompt": messages, "reply": reply, "reply_json": reply_json,
            "reply_fold": len(reply) > FOLD_CHARS * 4, "error": redact(call.error)}
