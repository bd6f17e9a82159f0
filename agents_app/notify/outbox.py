"""The notification outbox (filled in by the notifications work of issue 35)."""


def announce(kind, opening, users=(), *, teams=(), detail="", serial=""):
    return []
