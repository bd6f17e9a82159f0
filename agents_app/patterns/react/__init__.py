"""ReAct (think, act, observe): the agent reasons, calls one tool, reads what it returned, and
repeats until it gives its final answer or a limit or a loop stops it. Tools that need a
person stop the run at a gate (approve or reject the call, or answer the agent's question)."""

from .pattern import APPROVAL_GATE, ASK_GATE, ReAct, ReActOptions, detect_loop

PATTERN = ReAct()

__all__ = ["APPROVAL_GATE", "ASK_GATE", "PATTERN", "ReAct", "ReActOptions", "detect_loop"]
