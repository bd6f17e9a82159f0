"""Triage of a review: a person's decision on each finding (accept, reject with a reason, undo),
settling the rest at once, and the verdict (finalise, override, reopen), each recorded as an
append-only ``TriageDecision``."""
