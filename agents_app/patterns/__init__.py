"""Pattern logic: plain Python, no Django. ``base`` is the contract, ``registry`` the list."""

from .base import Pattern
from .registry import PATTERNS, get_pattern, pattern_label, task_patterns

__all__ = ["PATTERNS", "Pattern", "get_pattern", "pattern_label", "task_patterns"]
