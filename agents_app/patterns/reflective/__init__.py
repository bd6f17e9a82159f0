"""Reflective (actor and critic): the actor drafts, the critic judges, the actor revises, until
the critic approves or the round limit is reached."""

from .pattern import Critique, Reflective, ReflectiveOptions

PATTERN = Reflective()

__all__ = ["PATTERN", "Critique", "Reflective", "ReflectiveOptions"]
