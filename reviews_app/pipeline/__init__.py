"""Multi-agent code review, as plain Python (no Django): input parsing, static analysis,
the reviewer/reflection/synthesis pattern, and exports. ``reviews_app`` persists and shows it."""
