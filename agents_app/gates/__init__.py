"""Gates shared by a team (issue 35): who a waiting gate is for, how many approvals it
needs, its deadline, and the audit of everything that happened at it."""
