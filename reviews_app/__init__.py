"""Multi-agent code review: reviewers, reflection, synthesis, and a person's triage."""

__version__ = "0.1.0"  # the project version in pyproject.toml
