"""Teams (issue 35): a run, review, connection or experiment may belong to a team. Its
members see it; members with the approver role decide its gates; admins also manage the
members and the team's gate rules. Personal items stay personal. Every access question is
answered in ``access.py``."""
