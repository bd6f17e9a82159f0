"""The notification tasks (imported by ``agents_app.tasks`` so that workers register them)."""
