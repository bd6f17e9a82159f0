"""Team memories: path-scoped notes a person approved ("in tests/**, asserts are intended"),
suggested when a finding is rejected with a reason, read by the reviewers and applied at the
synthesis (dropping or downgrading the findings they match)."""
