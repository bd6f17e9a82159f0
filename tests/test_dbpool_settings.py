"""Issue 37's settings and hook: on PostgreSQL each process pools at most
QUORUM_DB_POOL_SIZE connections (CONN_MAX_AGE must be 0 then), a transaction pooler turns
server-side cursors off, SQLite gets no pool; ``turns.waiting`` calls its hook in every thread
before the wait, and ``dbpool.release`` leaves a connection alone without a pool or inside a
transaction. (On a real PostgreSQL: tests/test_postgres.py, ``case_pool``.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, transaction

from common import dbpool, turns

ROOT = Path(__file__).resolve().parents[1]


def databases(**env) -> tuple[int, str]:
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "d = settings.DATABASES['default']; print(json.dumps({'options': "
            "d.get('OPTIONS', {}).get('pool'), 'ssc': d.get('DISABLE_SERVER_SIDE_CURSORS', "
            "False), 'age': d['CONN_MAX_AGE']}))")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "CONN_MAX",
                                                                     "QUORUM_DB_"))}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={
                              **base, "DJANGO_SETTINGS_MODULE": "config.settings",
                              "DEBUG": "true", **env})
    return proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-1]


def test_postgres_gets_a_pool_sized_from_the_environment():
    url = "postgres://u:p@127.0.0.1:5432/quorum"
    assert databases(DATABASE_URL=url) == (
        0, '{"options": {"min_size": 2, "max_size": 10, "timeout": 30.0}, "ssc": false, '
           '"age": 0}')
    assert databases(DATABASE_URL=url, QUORUM_DB_POOL_SIZE="40", QUORUM_DB_POOL_TIMEOUT="5",
                     QUORUM_DB_TRANSACTION_POOLER="true") == (
        0, '{"options": {"min_size": 2, "max_size": 40, "timeout": 5.0}, "ssc": true, '
           '"age": 0}')
    assert databases(DATABASE_URL=url, QUORUM_DB_POOL_SIZE="0", CONN_MAX_AGE="60") == (
        0, '{"options": null, "ssc": false, "age": 60}')
    code, out = databases(DATABASE_URL=url, CONN_MAX_AGE="60")
    assert code != 0 and "CONN_MAX_AGE must be 0 with the connection pool" in out


def test_sqlite_gets_no_pool():
    assert databases(DATABASE_URL="sqlite:///tmp-never-opened.sqlite3")[1].startswith(
        '{"options": null')


def test_waiting_calls_its_hook_first_in_any_thread():
    seen = []
    previous = turns._before_wait
    turns.before_wait(lambda: seen.append(turns.holds()))
    try:
        with turns.waiting():
            seen.append("waited")
    finally:
        turns.before_wait(previous)
    assert seen == [False, "waited"]


@pytest.mark.django_db
def test_release_leaves_a_connection_without_a_pool_or_in_a_transaction():
    connection.ensure_connection()
    assert not dbpool.pooled()
    dbpool.release()  # SQLite: no pool, nothing to give back
    assert connection.connection is not None
    with transaction.atomic():
        dbpool.release()
        assert connection.connection is not None
