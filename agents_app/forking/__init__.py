"""Forks, replays and comparisons of runs (issue 33)."""
