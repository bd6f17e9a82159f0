"""Quorum vote (self-consistency across models): several voters answer the task on their own,
an aggregator groups the equivalent answers, and the largest group's answer wins when enough
voters agree; otherwise a person picks, edits, or asks for another round."""

from .grouping import AnswerGroup, Grouping
from .pattern import GATE, QuorumVote, VoteOptions

PATTERN = QuorumVote()

__all__ = ["GATE", "PATTERN", "AnswerGroup", "Grouping", "QuorumVote", "VoteOptions"]
