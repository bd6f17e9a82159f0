"""Debate: two or more named positions argue for a number of rounds, then a judge writes the
conclusion."""

from .pattern import DEFAULT_POSITIONS, Conclusion, Debate, DebateOptions, parse_positions

PATTERN = Debate()

__all__ = ["DEFAULT_POSITIONS", "PATTERN", "Conclusion", "Debate", "DebateOptions",
           "parse_positions"]
