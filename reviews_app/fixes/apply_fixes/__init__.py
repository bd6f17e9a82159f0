"""Apply a review's accepted, proven fixes as one commit on a new branch, and stop at the
change pattern's merge-request gate. See ``pattern.py``."""

from .pattern import ApplyFixes

PATTERN = ApplyFixes()

__all__ = ["PATTERN", "ApplyFixes"]
