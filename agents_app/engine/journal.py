"""The journal a stage's gateway writes through: every model call persisted with the run's
totals, replayed when the stage runs again after an interruption, and held to the run's
limits (cost, tokens, time, a cancel request) before it is made. Each check also extends the
stage's lease."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from ..events import append_events
from ..llm.gateway import CallOutcome, GatewayConfig, redact
from ..models import ModelCall, Run
from ..patterns.base import BudgetExceeded, Cancelled, Event, TimeLimitExceeded
from .leases import DB_UNAVAILABLE, LeaseLost, StageInterrupted, lease_until


def gateway_config(routes: dict[str, str]) -> GatewayConfig:
    return GatewayConfig(
        routes=routes,
        timeout=settings.QUORUM_LLM_TIMEOUT,
        max_retries=settings.QUORUM_LLM_MAX_RETRIES,
        retry_base_delay=settings.QUORUM_LLM_RETRY_BASE_DELAY,
        allow_network=settings.QUORUM_ALLOW_MODEL_REQUESTS,
        api_base=settings.QUORUM_API_BASE,
    )


@dataclass
class _Limits:
    max_cost: Decimal | None
    max_tokens: int | None
    max_seconds: float
    active_before: float


class DbJournal:
    def __init__(self, run: Run, stage: str, token: str):
        self.run_id = run.pk
        self.stage = stage
        self.token = token
        max_seconds = (run.options or {}).get("max_run_seconds") or settings.QUORUM_MAX_RUN_SECONDS
        self.limits = _Limits(run.max_cost_usd, run.max_tokens, float(max_seconds),
                              run.active_seconds)
        self.started = time.monotonic()
        # Only a stage run again after an interruption can have calls to replay.
        self.existing = {c.key: c for c in ModelCall.objects.filter(
            run_id=run.pk, stage=stage)} if run.stage_attempt > 1 else {}
        self.thread = threading.get_ident()
        self.lock = threading.Lock()
        self.extended_at = time.monotonic()  # the claim has just set a fresh lease

    def _release(self) -> None:
        """Parallel stages call from helper threads, each with its own Django connection:
        close it after each use so a finished helper thread leaves no connection behind."""
        if threading.get_ident() != self.thread:
            connection.close()

    def replay(self, key: str) -> CallOutcome | None:
        c = self.existing.get(key)
        if c is None:
            return None
        return CallOutcome(role=c.role, model=c.model, messages=c.messages, response=c.response,
                           prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                           cost_usd=float(c.cost_usd), latency_ms=c.latency_ms,
                           attempts=c.attempts, error=c.error, retryable=c.retryable)

    def before_call(self, key: str, role: str, model: str) -> None:
        try:
            self._check_and_extend(role)
        except DB_UNAVAILABLE as exc:
            self._release()
            raise StageInterrupted(f"the database could not be read before the {role} call: "
                                   f"{exc}") from exc
        except BaseException:
            self._release()
            raise
        # On success the helper thread keeps its connection for ``record``, which releases it.

    def _check_and_extend(self, role: str) -> None:
        row = Run.objects.filter(pk=self.run_id).values(
            "lease_owner", "cancel_requested", "cost_usd", "prompt_tokens",
            "completion_tokens").get()
        if row["lease_owner"] != self.token:
            raise LeaseLost()
        if row["cancel_requested"]:
            raise Cancelled("Cancelled on request, before the next model call.")
        lim = self.limits
        spent = row["cost_usd"]
        tokens = row["prompt_tokens"] + row["completion_tokens"]
        if lim.max_cost is not None and spent >= lim.max_cost:
            raise BudgetExceeded(f"Budget exceeded: spent ${spent:.4f} of the ${lim.max_cost:.4f} "
                                 f"allowed ({tokens:,} tokens). Stopped before the {role} call.")
        if lim.max_tokens is not None and tokens >= lim.max_tokens:
            raise BudgetExceeded(f"Budget exceeded: used {tokens:,} of the {lim.max_tokens:,} tokens "
                                 f"allowed (${spent:.4f}). Stopped before the {role} call.")
        elapsed = lim.active_before + time.monotonic() - self.started
        if elapsed > lim.max_seconds:
            raise TimeLimitExceeded(f"Time limit reached: {elapsed:.0f} s of work, the limit is "
                                    f"{lim.max_seconds:.0f} s. Stopped before the {role} call.")
        # Extending the lease is a write; parallel calls share one extension per tenth of
        # the lease instead of each taking the write lock on the critical path.
        now = time.monotonic()
        with self.lock:
            due = now - self.extended_at > settings.QUORUM_STAGE_LEASE_SECONDS / 10
            if due:
                self.extended_at = now
        if due:
            Run.objects.filter(pk=self.run_id, lease_owner=self.token).update(
                lease_expires_at=lease_until())

    def record(self, key: str, o: CallOutcome) -> None:
        try:
            self._record(key, o)
        except DB_UNAVAILABLE as exc:
            raise StageInterrupted(f"the database could not record the {o.role} call: "
                                   f"{exc}") from exc
        finally:
            self._release()

    def _record(self, key: str, o: CallOutcome) -> None:
        with transaction.atomic():
            # A call that returns after its attempt was abandoned and the run claimed again
            # is not this attempt's to record: the new attempt makes (and records) it.
            if Run.objects.filter(pk=self.run_id).exclude(lease_owner="").exclude(
                    lease_owner=self.token).exists():
                raise LeaseLost()
            ModelCall.objects.create(
                run_id=self.run_id, stage=self.stage, key=key, role=o.role, model=o.model,
                messages=o.messages, response=o.response, prompt_tokens=o.prompt_tokens,
                completion_tokens=o.completion_tokens, cost_usd=Decimal(str(o.cost_usd)),
                latency_ms=o.latency_ms, attempts=o.attempts, error=redact(o.error),
                retryable=o.retryable)
            tokens = o.prompt_tokens + o.completion_tokens
            if o.error:
                msg = f"{o.role} call to {o.model} failed after {o.attempts} attempt(s): {o.error}"
            else:
                msg = (f"{o.role} · {o.model}: {tokens:,} tokens, ${o.cost_usd:.4f}, "
                       f"{o.latency_ms} ms")
            append_events(self.run_id, [Event("model_call", msg, {
                "role": o.role, "model": o.model, "tokens": tokens, "error": bool(o.error)})],
                cost_usd=F("cost_usd") + Decimal(str(o.cost_usd)),
                prompt_tokens=F("prompt_tokens") + o.prompt_tokens,
                completion_tokens=F("completion_tokens") + o.completion_tokens,
                calls=F("calls") + 1)


