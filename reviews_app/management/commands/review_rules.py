"""Review rules from the command line.

``manage.py review_rules check`` lists every stored rule whose pattern reviews do not use
(RE2 refuses it: rules saved before patterns were matched with RE2 may use a backreference or
lookaround); it exits with status 1 when there is one, so a deploy script can stop on it.
Such a rule is never matched with Python's ``re``: each review notes that its pattern was not
used, and the rule counts as not checked unless the rules checker read it.

``manage.py review_rules add --owner NAME --title T --text X [--pattern P] [--glob G]
[--severity S]`` saves an active rule for every review of the owner, with the checks of the
rules page: a pattern RE2 cannot run is refused with the same words.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from reviews_app.memories import match as globs
from reviews_app.models import ReviewRule
from reviews_app.rules import generate as rulegen


class Command(BaseCommand):
    help = "Check stored review rules' patterns, or add a rule."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        check = sub.add_parser("check", help="List rules whose pattern reviews do not use.")
        check.add_argument("--owner", help="Only this user's rules (username).")
        add = sub.add_parser("add", help="Save an active rule (refused like the page does).")
        add.add_argument("--owner", required=True, help="Username of the rule's owner.")
        add.add_argument("--title", required=True)
        add.add_argument("--text", required=True)
        add.add_argument("--pattern", default="")
        add.add_argument("--glob", default="**")
        add.add_argument("--severity", default="medium", choices=rulegen.RULE_SEVERITIES)

    def _owner(self, name: str):
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"No user is called {name!r}.")
        return user

    def handle(self, *args, **opts):
        if opts["action"] == "add":
            return self._add(opts)
        rules = ReviewRule.objects.exclude(matcher={}).order_by("id")
        if opts.get("owner"):
            rules = rules.filter(owner=self._owner(opts["owner"]))
        bad = [(r, r.pattern_problem) for r in rules]
        bad = [(r, why) for r, why in bad if why]
        for r, why in bad:
            self.stdout.write(f"rule #{r.pk} ({r.owner.get_username()}, {r.status}) "
                              f"\u201c{r.title}\u201d: {why} Its pattern is not used.")
        self.stdout.write(f"{len(bad)} rule(s) with a pattern reviews do not use.")
        if bad:
            raise SystemExit(1)
        return None

    def _add(self, opts) -> None:
        owner = self._owner(opts["owner"])
        title = rulegen.one_line(opts["title"], rulegen.MAX_TITLE)
        text = opts["text"].strip()[:rulegen.MAX_TEXT]
        if not title or not text:
            raise CommandError("A rule needs a title and a text.")
        if error := globs.glob_error(opts["glob"]):
            raise CommandError(error)
        pattern = opts["pattern"]
        if pattern.strip() and (error := rulegen.pattern_error(pattern)):
            raise CommandError(error)
        rule = ReviewRule.objects.create(
            owner=owner, path_glob=opts["glob"], title=title, text=text,
            severity=opts["severity"], matcher={"pattern": pattern} if pattern.strip() else {},
            status=ReviewRule.Status.ACTIVE, origin=ReviewRule.Origin.MANUAL, created_by=owner,
            decided_by=owner, decided_at=timezone.now())
        self.stdout.write(f"Saved rule #{rule.pk} \u201c{rule.title}\u201d.")
