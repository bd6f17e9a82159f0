"""A trigram index of runs' tasks and answers on SQLite, for the history search.

The history's search is a substring match (``icontains``) on the task and the answer. Without
an index, a search that matches few runs reads every run of the user: with 100,000 runs
(about 5 KB each with their state) that is over half a second per request
(``tests/benchmarks/bench_history.py``). This adds an FTS5 table with the trigram tokenizer
(SQLite 3.34 or newer) that the history uses to find candidate runs; the view still checks
each candidate with ``icontains``, so results are exactly what they were.

``detail=none`` keeps the index small (about 0.3× the indexed text, where ``detail=full``
is about 3×): it records which runs contain a trigram, not where, so a candidate has every
trigram of the search term but not necessarily in a row; the recheck drops those.

The table is "external content" (it stores no text, only the index) and is kept up to date
by triggers on ``agents_app_run``. Note for later migrations: on SQLite, Django rebuilds a
table for many field changes (create a copy, drop the original, rename), which drops these
triggers; the view then falls back to the plain search (it checks that the triggers exist),
so results stay right but the search is slow again until this SQL runs once more
(``CREATE`` statements are ``IF NOT EXISTS``, and ``rebuild`` re-indexes every run).

On other databases (Postgres) nothing is created: the view keeps the plain ``icontains``;
a ``pg_trgm`` GIN index is the Postgres counterpart.
"""

from django.db import OperationalError, migrations

TRIGGERS = ("agents_app_run_search_ai", "agents_app_run_search_ad", "agents_app_run_search_au")

CREATE = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS agents_app_run_search USING fts5(task, answer, "
    "content='agents_app_run', content_rowid='id', tokenize='trigram', detail='none')",
    """CREATE TRIGGER IF NOT EXISTS agents_app_run_search_ai AFTER INSERT ON agents_app_run BEGIN
        INSERT INTO agents_app_run_search(rowid, task, answer) VALUES (new.id, new.task, new.answer);
    END""",
    """CREATE TRIGGER IF NOT EXISTS agents_app_run_search_ad AFTER DELETE ON agents_app_run BEGIN
        INSERT INTO agents_app_run_search(agents_app_run_search, rowid, task, answer)
        VALUES ('delete', old.id, old.task, old.answer);
    END""",
    # Runs are updated often (leases, counters, state); only a changed task or answer re-indexes.
    """CREATE TRIGGER IF NOT EXISTS agents_app_run_search_au
        AFTER UPDATE OF task, answer ON agents_app_run
        WHEN old.task IS NOT new.task OR old.answer IS NOT new.answer BEGIN
        INSERT INTO agents_app_run_search(agents_app_run_search, rowid, task, answer)
        VALUES ('delete', old.id, old.task, old.answer);
        INSERT INTO agents_app_run_search(rowid, task, answer) VALUES (new.id, new.task, new.answer);
    END""",
    "INSERT INTO agents_app_run_search(agents_app_run_search) VALUES ('rebuild')",
]
DROP = [
    "DROP TRIGGER IF EXISTS agents_app_run_search_ai",
    "DROP TRIGGER IF EXISTS agents_app_run_search_ad",
    "DROP TRIGGER IF EXISTS agents_app_run_search_au",
    "DROP TABLE IF EXISTS agents_app_run_search",
]


def _trigram_fts5_available(cursor) -> bool:
    try:
        cursor.execute("CREATE VIRTUAL TABLE temp.quorum_fts5_probe USING fts5(x, tokenize='trigram')")
    except OperationalError:  # no FTS5, or SQLite older than 3.34: the view searches without it
        return False
    cursor.execute("DROP TABLE temp.quorum_fts5_probe")
    return True


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        if not _trigram_fts5_available(cursor):
            return
        for sql in CREATE:
            cursor.execute(sql)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        for sql in DROP:
            cursor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ("agents_app", "0005_react_gate_statuses"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
