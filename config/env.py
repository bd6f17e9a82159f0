"""Reading settings from the environment: django-environ's ``Env``, except that a value that
cannot be used stops start-up with what the variable takes (``manage.py`` prints it on one
line and exits 2), never a cast's traceback and never the value itself (a misplaced secret
stays unprinted). Numbers are read strictly: ``12abc``, ``nan``, ``inf`` and negatives are
refused rather than read as 12 or passed on; an empty value counts as unset. Each number has
an upper bound too (by default what a database integer column holds, or a billion for a
duration or price), so a typo of a few extra digits stops start-up instead of failing the
first run that stores or sleeps on it."""

from __future__ import annotations

import logging
import math
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import environ
from django.core.exceptions import ImproperlyConfigured

INT_HIGH = 2_147_483_647  # the largest value a database integer column holds (PostgreSQL)
FLOAT_HIGH = 1e9  # seconds (31 years) or dollars: past any real setting, within every library


def one_line(exc: ImproperlyConfigured) -> str:
    """What a process that cannot start prints (manage.py, config/asgi.py): the setting's
    message on one line, without Django's pointer to a traceback that is not shown."""
    return " ".join(str(exc).replace(" Check the above exception.", "").split())


class Env(environ.Env):
    def int(self, var: str, default: Any = environ.Env.NOTSET,  # type: ignore[override]
            *, high: int = INT_HIGH) -> Any:
        return self._number(var, default, int, "a whole number", high)

    def float(self, var: str, default: Any = environ.Env.NOTSET,  # type: ignore[override]
              *, high: float = FLOAT_HIGH) -> Any:
        return self._number(var, default, float, "a number", high)

    def port(self, var: str, default: int) -> int:
        value = self.int(var, default=default)
        if not 1 <= value <= 65535:
            raise ImproperlyConfigured(f"{var} takes a port number from 1 to 65535.")
        return value

    def _number(self, var: str, default: Any, kind: type, what: str, high: float) -> Any:
        raw = self.ENVIRON.get(var, "").strip()
        if not raw:
            if default is environ.Env.NOTSET:
                raise ImproperlyConfigured(f"Set {var} ({what}).")
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{var} takes {what}; it is set to something else.") \
                from None
        if kind is float and not math.isfinite(value):
            raise ImproperlyConfigured(f"{var} takes a finite number, not NaN or an infinity.")
        if value < 0:  # every number Quorum reads is a count, size, duration, price or port
            raise ImproperlyConfigured(f"{var} takes {what} of 0 or more; it is set below 0.")
        if value > high:
            shown = f"{int(high):,}" if float(high).is_integer() else f"{high:g}"
            raise ImproperlyConfigured(f"{var} takes {what} up to {shown}; it is set above that.")
        return value

    def db_url(self, var: str = environ.Env.DEFAULT_DATABASE_ENV,  # type: ignore[override]
               default: Any = environ.Env.NOTSET, engine: Any = None) -> dict:
        """The database from its URL; an empty one counts as unset, and a URL naming no
        database Django knows is refused here (without printing it: it may hold a password)."""
        url = self.ENVIRON.get(var, "").strip() or default
        if url is environ.Env.NOTSET:
            raise ImproperlyConfigured(f"Set {var}.")
        config = self.db_url_config(url, engine=engine)
        if not config.get("ENGINE") or "." not in config["ENGINE"]:
            raise ImproperlyConfigured(
                f"{var} names no database Quorum can use: give postgres://user:password@host/"
                "name or sqlite:///path/to/file.sqlite3.")
        return config

    db = db_url

    def time_zone(self, var: str, default: str) -> str:
        name = self.str(var, default=default).strip() or default
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ImproperlyConfigured(f"{var} is not a time zone name (such as UTC or "
                                       "Europe/Paris).") from None
        return name

    def log_level(self, var: str, default: str) -> str:
        name = self.str(var, default=default).strip().upper() or default
        if not isinstance(logging.getLevelName(name), int):
            raise ImproperlyConfigured(f"{var} takes DEBUG, INFO, WARNING, ERROR or CRITICAL.")
        return name
