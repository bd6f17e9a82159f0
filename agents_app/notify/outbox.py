"""Writing notifications: ``announce`` puts one outbox row per message in the caller's
transaction and sends the delivery task once that transaction commits. Nothing here touches
the network.

Each row's ``key`` is made of what caused it (kind, gate opening, the caller's ``serial``) and
who receives it, so a redelivered task or a timer fired twice writes nothing new.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from decimal import Decimal

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from . import links
from .models import ALL_KINDS, Endpoint, Kind, Notification, Preference

EMAIL, WEBHOOK = "email", "webhook"
TEST_KIND = "test"  # the kind of a message sent from the settings page's "Send a test"
TASK_WORDS = 80  # characters of the task's first line in a subject or a message

HEADLINES = {
    Kind.OPENED: "A gate waits for a decision",
    Kind.ASSIGNED: "A gate was assigned to you",
    Kind.REMINDER: "A gate's deadline is near",
    Kind.ESCALATED: "A gate was escalated to your team",
    Kind.RESET: "Approvals were reset by an edit",
    Kind.DECIDED: "A gate was decided",
}


def _send(ids: list[int]) -> None:
    from . import deliver  # looked up when called: tests replace ``deliver.send``

    deliver.send(ids)


def send_on_commit(ids: list[int]) -> None:
    """The delivery task for these rows, once the current transaction commits (at once
    outside one). A row whose task is lost is picked up by the sweep (``deliver_due``)."""
    if ids:
        transaction.on_commit(lambda: _send(list(ids)))


def first_line(text: str, limit: int = TASK_WORDS) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _key(*parts: object) -> str:
    key = ":".join(str(p) for p in parts)
    if len(key) > 200:  # a long serial: its digest instead
        key = key[:120] + ":" + hashlib.sha256(key.encode()).hexdigest()
    return key


class _Gate:
    """What a message says of one gate opening, read once per ``announce``."""

    def __init__(self, opening, kind: str, detail: str):
        from ..patterns import PATTERNS

        run = opening.run
        pattern = PATTERNS.get(run.pattern)
        self.opening, self.run, self.kind, self.detail = opening, run, kind, detail.strip()
        self.pattern = (pattern.label if pattern and pattern.label else run.pattern)
        self.gate_label = gate_words(opening.gate)
        self.task = first_line(run.task)
        self.team = opening.team.name if opening.team_id else ""
        self.approvals = opening.votes.filter(voided_at__isnull=True, action="approve").count()
        self.run_url = links.absolute(run.get_absolute_url() + "#gate")

    @property
    def subject(self) -> str:
        headline = HEADLINES.get(self.kind, "News of a gate")  # type: ignore[call-overload]
        return f"[Quorum] {headline}: {self.gate_label} of run #{self.run.pk} ({self.task})"[:300]

    def body(self, url: str, personal: bool) -> str:
        o = self.opening
        lines = [HEADLINES.get(self.kind, "News of a gate") + ".", "",  # type: ignore[call-overload]
                 f"Run #{self.run.pk} ({self.pattern}): {self.task}",
                 f"Gate: {self.gate_label}"]
        if self.team:
            lines.append(f"Team: {self.team}")
        lines.append(f"Approvals: {self.approvals} of {o.required} needed")
        if o.deadline_at:
            lines.append(f"Deadline: {timezone.localtime(o.deadline_at):%Y-%m-%d %H:%M %Z}")
        if self.detail:
            lines.append(f"Why: {self.detail}")
        lines.append(f"Cost so far: ${Decimal(self.run.cost_usd or 0):.4f}")
        lines += ["", f"Open the gate: {url}"]
        if personal:
            lines.append("This link is yours alone: it works once, after you sign in, and "
                         f"expires in {_hours()}. Approving or rejecting is done on the page, "
                         "never by following the link.")
        return "\n".join(lines)

    def payload(self, url: str) -> dict:
        o = self.opening
        return {"type": f"gate.{self.kind}", "timestamp": timezone.now().isoformat(),
                "data": {"run": self.run.pk, "pattern": self.run.pattern, "gate": o.gate,
                         "opening": o.pk, "url": url, "team": self.team or None,
                         "approvals": self.approvals, "required": o.required,
                         "deadline": o.deadline_at.isoformat() if o.deadline_at else None,
                         "detail": self.detail}}


def gate_words(gate: str) -> str:
    """A gate in words ("plan approval"), as the run's status names it."""
    from ..models import Status, gate_status_labels

    label = str((dict(Status.choices) | gate_status_labels()).get(f"awaiting_{gate}", ""))
    if label.lower().startswith("awaiting "):
        label = label[len("awaiting "):]
    return label or gate.replace("_", " ")


def _hours() -> str:
    from django.conf import settings

    hours = settings.QUORUM_LINK_HOURS
    return f"{hours:g} hours" if hours != 1 else "1 hour"


def _unique(items: Iterable, key=lambda x: x.pk) -> list:
    seen, out = set(), []
    for item in items:
        if item is not None and key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def announce(kind: str, opening, users: Iterable = (), *, teams: Iterable = (),
             detail: str = "", serial: str = "") -> list[Notification]:
    """Write the notifications of one event at a gate opening, in the current transaction,
    and send them after it commits. Returns the rows (those an earlier call with the same
    kind, opening and serial wrote included).

    - each user in ``users`` gets an email when their choices include ``kind`` (no choices
      saved: every kind) and they have an address, and a webhook message to each of their own
      active endpoints that takes ``kind`` when their webhook choices include it;
    - each team in ``teams`` gets a webhook message to each of its active endpoints that
      takes ``kind``.
    ``detail`` says who or what caused it; ``serial`` tells apart two events of one kind at
    one opening (the opening's ``seq`` after an edit, a reminder's number)."""
    if kind not in Kind.values:
        raise ValueError(f"Unknown notification kind {kind!r}")
    users = _unique(users)
    teams = _unique(teams)
    prefs = {p.user_id: p for p in Preference.objects.filter(user__in=[u.pk for u in users])}
    own: dict[int, list[Endpoint]] = {}  # each person's endpoints, read in one query
    for ep in Endpoint.objects.filter(owner__in=[u.pk for u in users], team__isnull=True,
                                      active=True).order_by("pk"):
        own.setdefault(ep.owner_id, []).append(ep)
    planned: list[tuple[str, str, object, Endpoint | None]] = []  # key, channel, user, endpoint
    for user in users:
        pref = prefs.get(user.pk)
        email_kinds = pref.email_kinds if pref else ALL_KINDS
        webhook_kinds = pref.webhook_kinds if pref else ALL_KINDS
        if kind in (email_kinds or []) and getattr(user, "email", ""):
            planned.append((_key(kind, opening.pk, serial, f"u{user.pk}"), EMAIL, user, None))
        if kind in (webhook_kinds or []):
            for ep in own.get(user.pk, []):
                if kind in (ep.kinds or []):
                    planned.append((_key(kind, opening.pk, serial, f"e{ep.pk}"), WEBHOOK,
                                    user, ep))
    if teams:
        for ep in Endpoint.objects.filter(team__in=[t.pk for t in teams], active=True):
            if kind in (ep.kinds or []):
                planned.append((_key(kind, opening.pk, serial, f"e{ep.pk}"), WEBHOOK, None, ep))
    planned = _unique(planned, key=lambda p: p[0])
    keys = [p[0] for p in planned]
    if not keys:
        return []
    existing = set(Notification.objects.filter(key__in=keys).values_list("key", flat=True))
    fresh = [p for p in planned if p[0] not in existing]
    if fresh:
        gate = _Gate(opening, kind, detail)
        rows = []
        for key, channel, user, ep in fresh:
            personal = user is not None
            url = links.link_for(user, opening) if personal else gate.run_url
            rows.append(Notification(
                key=key, kind=kind, channel=channel, recipient=user if channel == EMAIL else None,
                endpoint=ep, opening=opening, run=opening.run, subject=gate.subject,
                body=gate.body(url, personal), payload=gate.payload(url)))
        Notification.objects.bulk_create(rows, ignore_conflicts=True)
    out = list(Notification.objects.filter(key__in=keys).order_by("pk"))
    send_on_commit([n.pk for n in out if n.state == Notification.State.PENDING])
    return out


def announce_test(endpoint: Endpoint, user) -> tuple[Notification, bool]:
    """A test message to ``endpoint`` through the same outbox and delivery (kind "test", no
    gate). Two clicks within ten seconds make one message. Returns (row, whether new)."""
    url = links.absolute(reverse("notification_settings"))
    key = _key(TEST_KIND, f"e{endpoint.pk}", int(time.time()) // 10)
    subject = f"[Quorum] A test message for the endpoint “{endpoint.name}”"
    body = (f"{user.get_username()} sent this test from Quorum's notification settings "
            f"({url}). When this arrives, the endpoint works.")
    payload = {"type": "quorum.test", "timestamp": timezone.now().isoformat(),
               "data": {"endpoint": endpoint.name, "url": url}}
    row, created = Notification.objects.get_or_create(
        key=key, defaults={"kind": TEST_KIND, "channel": WEBHOOK, "endpoint": endpoint,
                           "subject": subject[:300], "body": body, "payload": payload})
    if created:
        send_on_commit([row.pk])
    return row, created
