"""The one path converter for ids in URLs (both apps' URLs and the WebSocket's).

Django's ``int`` converter takes any run of digits, and a number past a 64-bit integer makes
the database driver raise (SQLite: OverflowError; PostgreSQL: out of range) — a 500 instead
of a 404. ``<id:...>`` takes what a primary key or an index can be, 0 to 2**63 - 1, and
anything else does not match the URL at all (404; on the WebSocket, a clean close)."""

from __future__ import annotations

from django.urls import register_converter

MAX_ID = 2**63 - 1  # the largest BIGINT in SQLite and PostgreSQL


class IdConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ID:
            raise ValueError("too large for an id")  # Django treats it as no match
        return number

    def to_url(self, value) -> str:
        return str(int(value))


register_converter(IdConverter, "id")
