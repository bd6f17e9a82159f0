"""Creating a run: the pattern's initial state and first stage, the run's first event, and
its first stage enqueued once the run is committed."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..events import write_events
from ..forking import checkpoints
from ..llm.gateway import is_offline
from ..models import Run, Status
from ..patterns import get_pattern
from ..patterns.base import Event
from .scheduling import schedule_on_commit

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def create_run(owner: User, pattern_name: str, task: str, *, options: dict[str, Any],
               models: dict[str, str],
               max_cost_usd: Decimal | None = None, max_tokens: int | None = None,
               enqueue: bool = True, **labels: Any) -> Run:
    """A new run, queued. ``labels``: an experiment's run's ``experiment``, ``cell``,
    ``item`` and ``repetition``."""
    pattern = get_pattern(pattern_name)
    state = pattern.initial_state(task, options)
    # None of the pattern's roles this run does not call (a three-voter vote has no voter_4):
    # its page, its "offline model" label and its first event name the others alone.
    unused = set(pattern.roles) - set(pattern.roles_used(state.get("options", options)))
    models = {role: model for role, model in models.items() if role not in unused}
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, pattern=pattern.name, task=task, status=Status.QUEUED,
            stage=pattern.first_stage(state), state=state, options=state.get("options", options),
            models_used=models, offline=any(is_offline(m) for m in models.values()),
            max_cost_usd=max_cost_usd, max_tokens=max_tokens, last_event_seq=1, **labels)
        bound = pattern.bind_run(state, run.pk)
        if bound is not state:
            run.state, run.options = bound, bound.get("options", options)
            run.save(update_fields=["state", "options"])
        who = "offline model" if run.offline else ", ".join(sorted(set(models.values())))
        label = pattern.label
        article = "an" if label[:1].lower() in "aeiou" else "a"
        # A new run's first event is number 1, reserved by the INSERT itself.
        text = f"{owner} started {article} {label} run" + (f" ({who})." if who else ".")
        write_events(run.pk, 1, [Event("run_created", text, {"models": models})])
        checkpoints.write(run.pk, 0, stage=run.stage, gate="", state=run.state, event_seq=1)
        schedule_on_commit(run.pk, enqueue)
    return run
