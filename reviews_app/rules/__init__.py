"""Review rules: the rules a change must follow, written by hand or suggested from triage
comments, approved on the rules page, and checked by the review (the guardian)."""
