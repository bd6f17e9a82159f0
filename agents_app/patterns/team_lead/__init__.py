"""Team lead: a lead splits the task into subtasks for named team members, the members carry
them out (one after another, side by side, or with the lead reviewing and reassigning), and
the lead writes the final answer."""

from .pattern import DEFAULT_TEAM, STRATEGIES, TeamLead, TeamLeadOptions, parse_team

PATTERN = TeamLead()

__all__ = ["DEFAULT_TEAM", "PATTERN", "STRATEGIES", "TeamLead", "TeamLeadOptions", "parse_team"]
