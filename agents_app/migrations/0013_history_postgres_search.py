"""The history at 1,000,000 runs on PostgreSQL (issue 37): a trigram index for its search.

The history's search is a substring match of every word in the task or the answer: Django's
``icontains``, which PostgreSQL runs as ``UPPER(task) LIKE UPPER('%word%')``. A GIN index of
the ``pg_trgm`` extension on exactly those expressions (``UPPER(task)``, ``UPPER(answer)``,
``gin_trgm_ops``) serves that LIKE: PostgreSQL finds the runs holding every trigram of the
word in the index and rechecks each with the same LIKE, so results are exactly those of the
plain ``icontains`` (a word shorter than three characters has no trigram; the index cannot
narrow by it). This is the counterpart of SQLite's FTS5 trigram table (migration 0006).

On PostgreSQL only (on SQLite nothing happens): ``CREATE EXTENSION IF NOT EXISTS pg_trgm``
(a trusted extension since PostgreSQL 13: the database's owner may create it without being a
superuser), then the two indexes with ``CREATE INDEX CONCURRENTLY`` (the migration is not
atomic: building them on a large history does not block the workers writing runs). When the
extension cannot be created (a managed database that does not offer it, a role that does not
own the database), the migration says so and goes on: the search then reads runs without an
index, within its time limit, as it did before (``agents_app/search.py`` checks that both
indexes exist and are valid). Running ``CREATE EXTENSION pg_trgm`` as a privileged role and
then ``manage.py migrate agents_app 0012`` and ``migrate`` again builds them later.
"""

import sys

import django.db.models.expressions
from django.db import DatabaseError, migrations, models

import agents_app.models

INDEXES = {"run_task_trgm": "task", "run_answer_trgm": "answer"}


def create(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DatabaseError as exc:
            sys.stderr.write(
                f"\n  pg_trgm could not be created ({str(exc).strip()}): the history's search "
                "works without its index (slower on a large history). Create the extension "
                "as the database's owner or a superuser and run this migration again.\n")
            return
        for name, column in INDEXES.items():
            # A concurrent build that failed leaves an invalid index behind: build it again.
            cursor.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON "
                           "c.oid = i.indexrelid WHERE c.relname = %s", [name])
            row = cursor.fetchone()
            if row is not None and row[0]:
                continue
            if row is not None:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            cursor.execute(f"CREATE INDEX CONCURRENTLY {name} ON agents_app_run USING gin "
                           f"((UPPER({column})) gin_trgm_ops)")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):

    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("agents_app", "0012_model_call_latency_index"),
    ]

    operations = [
        migrations.RunPython(create, drop, elidable=False),
        # A team's runs by each sort key, on both databases (models.py: a member's sorted
        # history merges their personal runs' page with their teams').
        migrations.AddIndex(
            model_name="run",
            index=models.Index(condition=models.Q(("team__isnull", False)),
                               fields=["team", "cost_usd", "id"], name="run_team_cost"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(models.F("team"), django.db.models.expressions.CombinedExpression(
                models.F("prompt_tokens"), "+", models.F("completion_tokens")), models.F("id"),
                condition=models.Q(("team__isnull", False)), name="run_team_tokens"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(models.F("team"), agents_app.models.RunDuration(-1.0),
                               models.F("id"), condition=models.Q(("team__isnull", False)),
                               name="run_team_longest"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(models.F("team"), agents_app.models.RunDuration(1000000000000.0),
                               models.F("id"), condition=models.Q(("team__isnull", False)),
                               name="run_team_shortest"),
        ),
    ]
