"""Notifications (issue 35): when a gate opens, is assigned, is near its deadline, escalates
or has its approvals reset, by email and by outgoing webhooks. Written to an outbox in the
transaction that caused them and delivered after it commits, never inside it."""
