"""What the debaters and the judge are told. The offline replies (``offline.py``) read the
same headings, named here once."""

from __future__ import annotations

from typing import Any

QUESTION = "Question"
TRANSCRIPT_SO_FAR = "Transcript so far"
YOUR_TURN = "Your turn"
POSITIONS = "Positions"
TRANSCRIPT = "Transcript"
ROUND = "Round"  # "### Round N — position" in a transcript

DEBATER_SYSTEM = """You take part in a debate as "{name}". Your stance: {stance}
Argue for your stance in a few focused paragraphs of Markdown. From the second round on,
answer the strongest points the other positions made; do not repeat yourself. Be honest:
concede a point that is right."""

JUDGE_SYSTEM = """You judge a debate. Read the transcript and write a fair conclusion: what
the debate established, which position made the stronger case and why (or that neither
did), and what remains open. Judge the arguments, not the confidence of their tone."""


def transcript(arguments: list[dict[str, Any]]) -> str:
    blocks = []
    for a in arguments:
        text = a["text"] if a.get("text") else f"(no answer: {a.get('error', 'silent')})"
        blocks.append(f"### {ROUND} {a['round']} — {a['position']}\n{text}")
    return "\n\n".join(blocks)


def debater_messages(task: str, position: dict[str, str], n: int, rounds: int,
                     earlier: str) -> list[dict[str, str]]:
    """What ``position`` is told in round ``n`` of ``rounds`` (``earlier``: the transcript)."""
    system = DEBATER_SYSTEM.format(name=position["name"], stance=position["stance"])
    user = f"## {QUESTION}\n{task}\n"
    if earlier:
        user += f"\n## {TRANSCRIPT_SO_FAR}\n{earlier}\n"
    user += f"\n## {YOUR_TURN}\n{ROUND} {n} of {rounds}."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def judge_messages(task: str, positions: list[dict[str, str]],
                   arguments: list[dict[str, Any]]) -> list[dict[str, str]]:
    listed = "\n".join(f"- {p['name']}: {p['stance']}" for p in positions)
    user = (f"## {QUESTION}\n{task}\n\n## {POSITIONS}\n{listed}\n\n"
            f"## {TRANSCRIPT}\n{transcript(arguments)}\n")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
