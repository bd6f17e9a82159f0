"""List the registered patterns: key, name, roles and options with their defaults. With
``--markdown`` it prints the README's pattern table (a test keeps the two the same)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from agents_app.option_fields import default_of
from agents_app.patterns import PATTERNS
from agents_app.patterns.options import extra


def _options(pattern) -> list[str]:
    shown = []
    for name, info in pattern.options.model_fields.items():
        if extra(info).get("hidden"):
            continue
        default = default_of(pattern, name)
        if isinstance(default, list):
            default = ", ".join(d.get("name", str(d)) if isinstance(d, dict) else str(d)
                                for d in default) or extra(info).get("empty_means", "none")
        shown.append(f"`{name}` ({default})")
    return shown


def table() -> str:
    rows = ["| Key | Pattern | Roles | Options (default) | Started from |",
            "|---|---|---|---|---|"]
    for pattern in PATTERNS.values():
        start = "the dashboard's form" if pattern.starts_from_task else "its own page"
        rows.append(f"| `{pattern.name}` | {pattern.label} | {', '.join(pattern.roles)} | "
                    f"{', '.join(_options(pattern)) or '—'} | {start} |")
    return "\n".join(rows)


class Command(BaseCommand):
    help = "List the patterns Quorum offers (registry order), their roles and options."

    def add_arguments(self, parser):
        parser.add_argument("--markdown", action="store_true",
                            help="Print the README's table of patterns.")

    def handle(self, *args, **opts):
        if opts["markdown"]:
            self.stdout.write(table())
            return
        for pattern in PATTERNS.values():
            self.stdout.write(f"{pattern.name}: {pattern.label}")
            if pattern.summary:
                self.stdout.write(f"  {pattern.summary}")
            self.stdout.write(f"  roles: {', '.join(pattern.roles) or 'none (it calls no model)'}")
            if options := _options(pattern):
                self.stdout.write(f"  options: {', '.join(options).replace('`', '')}")
