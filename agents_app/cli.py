"""What the management commands that start runs share: who owns a headless run, ``--model``
options, option values checked with the web forms' own fields, one-line errors, and the
"database not set up" message, and when their runs' live announcements start."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from .llm.gateway import check_model_name

# A command-line run's live announcements start this long after the command does: most
# offline runs are over sooner, and never load the channel layer and Redis (events.py).
CLI_ANNOUNCE_AFTER = 2.0

EXIT_BAD_INPUT = 2  # as argparse: the command was not run because of what it was given


def bad_input(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_BAD_INPUT)


def refusal(field, exc: ValidationError) -> str:
    """The form field's message, or for a number out of range both ends at once ("takes 1 to
    5"), which says what to type rather than only which way the value was wrong."""
    low, high = getattr(field, "min_value", None), getattr(field, "max_value", None)
    if {e.code for e in exc.error_list} & {"min_value", "max_value"} \
            and low is not None and high is not None:
        return f"takes {low} to {high}."
    return " ".join(exc.messages)


def form_type(field, what: str = "a value"):
    """An argparse ``type=`` that cleans the option's text with a web form's field, so the
    command line takes exactly what the form takes (NaN, infinities, negatives and numbers
    past the form's limits are refused with the form's message)."""

    def parse(text: str):
        try:
            value = field.clean(text.strip())
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(refusal(field, exc)) from None
        if value is None:
            raise argparse.ArgumentTypeError(f"give {what}.")
        return value

    parse.__name__ = what  # argparse names the type in its message for a ValueError
    return parse


def check_with(field, value, option: str):
    """``value`` (already parsed) within a form field's limits; a bad-input error otherwise."""
    try:
        return field.clean(value)
    except ValidationError as exc:
        raise bad_input(f"{option}: {refusal(field, exc)}") from None


def option_or_env(value, var: str, field, fallback):
    """An option's value when it was given; else the environment variable ``var``'s, cleaned
    by the option's own form field (a bad one is refused naming the variable, not the
    option); else ``fallback``."""
    if value is not None:
        return value
    text = os.environ.get(var, "").strip()
    return check_with(field, text, var) if text else fallback


class CheckedCommand(BaseCommand):
    """A command whose usage errors are one line on stderr (exit 2), not the full usage, and
    which says how to set up the database when it has not been (``needs_database``)."""

    needs_database = True
    starts_runs = False  # its runs' live announcements wait CLI_ANNOUNCE_AFTER (events.py)

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        def error(message):
            # argparse prints the whole usage before its error; at a terminal the error and a
            # pointer to --help read better, on one line.
            if parser.called_from_command_line:
                parser.exit(EXIT_BAD_INPUT, f"{parser.prog}: error: {message} (see --help)\n")
            raise CommandError(f"Error: {message}", returncode=EXIT_BAD_INPUT)  # call_command

        parser.error = error
        return parser

    def execute(self, *args, **options):
        if self.needs_database:
            require_migrated()
        if not self.starts_runs:
            return super().execute(*args, **options)
        from .events import announcements_deferred  # models: not before Django is set up

        with announcements_deferred(CLI_ANNOUNCE_AFTER):
            return super().execute(*args, **options)


def require_migrated(alias: str = "default") -> None:
    """A bad-input error saying what to run when the database lacks this code's tables."""
    hint = ("run `make dev` once (it migrates and starts everything), or "
            "`python manage.py migrate`.")
    try:
        if _all_recorded(connections[alias]):
            return
        executor = MigrationExecutor(connections[alias])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise bad_input(f"The database cannot be opened ({exc}): check DATABASE_URL, then "
                        + hint) from None
    if pending:
        raise bad_input(f"The database is not set up ({len(pending)} migration(s) not "
                        f"applied): {hint}")


def _all_recorded(connection) -> bool:
    """Every migration file of every app is recorded as applied: then none is pending. Read
    from the file names (as Django's loader finds them) and one query, without importing
    every migration to build the graph; anything else (a file not recorded, a squashed
    migration) is left to the full check."""
    recorder = MigrationRecorder(connection)
    if not recorder.has_table():
        return False
    applied = set(recorder.applied_migrations())
    for app in apps.get_app_configs():
        dotted, _explicit = MigrationLoader.migrations_module(app.label)
        if dotted is None:
            continue
        try:
            module = importlib.import_module(dotted)
        except ModuleNotFoundError:
            continue  # an app without migrations (the loader skips it too)
        for _finder, name, is_pkg in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not is_pkg and name[0] not in "_~" and (app.label, name) not in applied:
                return False
    return True


def command_owner(username: str | None):
    """The user a headless run belongs to: ``username``, else the first superuser, else a
    ``cli`` user made for the purpose."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(username=username)
        except User.DoesNotExist:
            raise bad_input(f"No user {username!r}.") from None
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        user, _ = User.objects.get_or_create(username="cli")
    return user


def parse_models(specs: list[str], roles: tuple[str, ...], *,
                 returncode: int = EXIT_BAD_INPUT) -> dict:
    """``--model ROLE=NAME`` options as role → model; CommandError for a bad one."""
    models = {}
    for spec in specs:
        role, sep, name = spec.partition("=")
        if not sep or role not in roles:
            raise CommandError(f"--model takes ROLE=NAME with ROLE one of {', '.join(roles)}.",
                               returncode=returncode)
        if problem := check_model_name(name.strip()):
            raise CommandError(problem, returncode=returncode)
        models[role] = name.strip()
    return models
