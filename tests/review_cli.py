"""``manage.py review`` of a diff text, as the tests of the offline analyzers call it."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command


def review(tmp_path, text: str) -> tuple[int, dict, str]:
    """(exit status, the JSON export, stderr) of ``manage.py review <diff> --format json``."""
    path = tmp_path / "change.diff"
    path.write_text(text)
    out, err = StringIO(), StringIO()
    try:
        call_command("review", str(path), "--format", "json", stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code)
    return code, json.loads(out.getvalue()), err.getvalue()
