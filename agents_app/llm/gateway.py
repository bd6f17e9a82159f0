"""The one module that calls models through LiteLLM (imported when first needed, by
``runtime``; prices looked up once per model by ``pricing``).

It owns role → model routing, structured output (JSON-schema response format where the
model supports it, otherwise schema instructions in the prompt; then parse → repair → one
retry that shows the model its error), timeouts, retries with backoff on 429/5xx, usage and
cost, the built-in offline provider (``provider``), and the single place every call is logged.

No Django here: the engine passes a ``Journal`` that persists calls, replays the calls of a
stage that is executed again, and may stop the run between calls (cancel, budget, time).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, overload
from urllib.parse import urlparse

from pydantic import BaseModel

from common import netguard, secret_keys, turns

from ..patterns.base import ModelError, Reply, Schema, StructuredOutputError
from ..patterns.structured import (
    ParseError,
    json_schema,
    parse_structured,
    schema_instructions,
)
from . import offline, pricing
from .runtime import (
    OFFLINE_MODELS,
    OFFLINE_PROVIDER,
    ours,
    set_offline_latency,  # noqa: F401 - the app's settings set it from here
)
from .runtime import litellm as _litellm

log = logging.getLogger("quorum.llm")


@functools.cache
def _retryable() -> tuple[type[Exception], ...]:
    """Provider errors worth another attempt (LiteLLM's classes: loaded with it)."""
    litellm = _litellm()
    return (litellm.RateLimitError, litellm.InternalServerError,
            litellm.ServiceUnavailableError, litellm.BadGatewayError,
            litellm.APIConnectionError, litellm.Timeout)


# Key shapes of the providers and services a prompt or an error is likely to quote.
_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}|(?i:bearer)\s+[A-Za-z0-9._-]{12,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,})")
# A value assigned to a secret-sounding name (``AWS_SECRET_ACCESS_KEY="…"``, ``token: …``).
_ASSIGNED = re.compile(
    r"(?i)((?:secret|passw(?:or)?d|token|api[_-]?key|access[_-]?key|private[_-]?key)"
    r"[A-Za-z0-9_]*[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}]{6,}")
# This server's own secrets, whatever their shape (a self-hosted server's key, say).
_SECRET_ENV = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_SECRET_KEY|_PASSWORD)$")
_SECRET_ENDINGS = (b"_API_KEY", b"_TOKEN", b"_SECRET", b"_SECRET_KEY", b"_PASSWORD")


def env_secrets() -> list[str]:
    """This server's secret values (read now: the environment may change), names matched
    undecoded (``os.environb``): decoding the whole environment cost more than redacting."""
    if not os.supports_bytes_environ:
        return [value for name, value in os.environ.items()
                if len(value) >= 8 and _SECRET_ENV.search(name)]
    out = []
    env = os.environb
    for name in list(env):
        # ``_SECRET_ENV`` ends in ``$``: the end of the name, or before a final newline.
        if name.endswith(_SECRET_ENDINGS) or (name.endswith(b"\n")
                                              and name[:-1].endswith(_SECRET_ENDINGS)):
            value = env.get(name)
            if value is not None and len(text := os.fsdecode(value)) >= 8:
                out.append(text)
    return out


# What a text must hold for ``_SECRET`` to match (its literals; only "bearer" ignoring case)
# and for ``_ASSIGNED`` to (every name holds one, ignoring case; "ſ" matches "s" then, and
# the Kelvin sign lowers to "k"). Both try every alternative at every position (half a
# microsecond a character), so a text without them skips a substitution that changes nothing.
_SECRET_LITERALS = ("sk-", "AIza", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                    "github_pat_", "xox")
_ASSIGNED_WORDS = ("secret", "passw", "token", "key")


# Texts the patterns below found nothing in, so that the same text again (a pattern's system
# prompt, a schema's instructions: the same in every run) is not scanned again. Only texts
# left unchanged are kept, so none holds anything the patterns would blank; the set is
# emptied once it holds CLEAN_CHARS characters. This server's own secret values are
# replaced before the set is asked: they may change with the environment.
_clean: set[str] = set()
_clean_chars = 0
_clean_lock = threading.Lock()
CLEAN_CHARS = 2_000_000
CLEAN_MIN = 256  # shorter texts cost less to scan than to remember


def redact(text: str, secrets: list[str] | None = None) -> str:
    """Blank anything that looks like a key or secret before it is stored, shown or logged.
    ``secrets``: ``env_secrets()`` read once by a caller redacting many texts."""
    if not text:  # every call's (usually empty) error passes through here
        return text
    for value in env_secrets() if secrets is None else secrets:
        text = text.replace(value, "[redacted]")
    if text in _clean:
        return text
    out = _redact_patterns(text)
    if CLEAN_MIN <= len(text) <= CLEAN_CHARS and out == text:
        _remember_clean(text)
    return out


def _remember_clean(text: str) -> None:
    global _clean_chars
    with _clean_lock:
        if text in _clean:
            return
        if _clean_chars + len(text) > CLEAN_CHARS:
            _clean.clear()
            _clean_chars = 0
        _clean.add(text)
        _clean_chars += len(text)


def _redact_patterns(text: str) -> str:
    low = text.lower()
    if "ſ" in text or any(word in low for word in _ASSIGNED_WORDS):
        text = _ASSIGNED.sub(r"\1[redacted]", text)
        low = text.lower()
    if "bearer" in low or any(literal in text for literal in _SECRET_LITERALS):
        text = _SECRET.sub("[redacted]", text)
    # Keys of other known formats (payment, source hosting, private key blocks) are shortened
    # to a prefix and their length, as a review shows them.
    return secret_keys.mask_known(text)


def redact_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a call's messages with every text redacted: what the journal stores."""
    secrets = env_secrets()  # the environment read once for all of them
    return [{k: redact(v, secrets) if isinstance(v, str) else v for k, v in m.items()}
            for m in messages]


def is_offline(model: str) -> bool:
    return model.startswith(OFFLINE_PROVIDER + "/")


def is_in_process(model: str) -> bool:
    """Custom LiteLLM providers (the offline model, a test's scripted model) run in this
    process: no network, so never blocked, and they are told the role and schema."""
    if is_offline(model):
        return True  # known without loading LiteLLM
    provider = model.split("/", 1)[0]
    return any(p.get("provider") == provider for p in _litellm().custom_provider_map)


def check_model_name(model: str) -> str | None:
    """None when LiteLLM can route ``model``; otherwise a message for the person."""
    model = model.strip()
    if not model:
        return "Give a model name."
    if is_offline(model):
        return None if model in OFFLINE_MODELS else f"The offline provider has only {', '.join(OFFLINE_MODELS)}."
    provider = model.split("/", 1)[0] if "/" in model else ""
    litellm = _litellm()
    routable = model in litellm.model_cost or (
        provider and provider in litellm.provider_list and model.split("/", 1)[1])
    if not routable:
        return (f"Unknown model “{model}”. Use a name from LiteLLM's model list (e.g. "
                "gpt-4o-mini) or prefix the provider (e.g. ollama/llama3, openai/my-model).")
    return missing_credentials(model)


def missing_credentials(model: str) -> str | None:
    """A message when the provider of ``model`` has no key (or base URL) in the server's
    environment, so a run is refused at the start instead of failing at its first call.
    Skipped when every call goes to a configured base URL (``QUORUM_API_BASE``)."""
    if is_offline(model) or os.environ.get("QUORUM_API_BASE"):
        return None
    provider = model.split("/", 1)[0] if "/" in model else ""
    litellm = _litellm()
    if provider and provider not in litellm.provider_list:
        return None  # a custom provider registered in-process
    try:
        found = litellm.validate_environment(model)
    except Exception:  # noqa: BLE001 - LiteLLM could not tell: let the call decide
        return None
    if found.get("keys_in_environment") or not found.get("missing_keys"):
        return None
    names = " or ".join(found["missing_keys"])
    return (f"No credentials for “{model}” on this server: set {names} in the environment "
            "Quorum runs in, or choose another model.")


@functools.lru_cache(maxsize=256)
def _supports_schema(model: str) -> bool:  # a price-map lookup: once per model, not per call
    if model in OFFLINE_MODELS:
        return True  # as ``provider`` registers them, without loading LiteLLM
    try:
        return bool(_litellm().supports_response_schema(model=model))
    except Exception:  # unknown to the price map: fall back to instructions in the prompt
        return False


@functools.lru_cache(maxsize=64)
def _is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- journal and call outcome ------------------------------------------------------------------
@dataclass
class CallOutcome:
    role: str
    model: str
    messages: list[dict[str, str]]
    response: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0
    attempts: int = 1
    error: str = ""
    retryable: bool = False


class Journal(Protocol):
    def replay(self, key: str, role: str = "", model: str = "",
               messages: list[dict[str, str]] | None = None) -> CallOutcome | None: ...

    def before_call(self, key: str, role: str, model: str) -> None: ...

    def record(self, key: str, outcome: CallOutcome) -> None: ...


class NullJournal:
    def replay(self, key: str, role: str = "", model: str = "",
               messages: list[dict[str, str]] | None = None) -> CallOutcome | None:
        return None

    def before_call(self, key: str, role: str, model: str) -> None:
        return None

    def record(self, key: str, outcome: CallOutcome) -> None:
        return None


@dataclass
class GatewayConfig:
    routes: dict[str, str]
    timeout: float = 120.0
    max_retries: int = 2
    retry_base_delay: float = 1.0
    allow_network: bool = True
    api_base: str = ""  # an OpenAI-compatible base URL for every non-offline call
    extra: dict[str, Any] = field(default_factory=dict)
    # model → seconds its call may receive nothing before it is retried (the engine learns it
    # from the journal: engine/latency.py); None: ``timeout`` for every attempt.
    stall_timeout: Callable[[str], float] | None = None

    def attempt_timeout(self, first: float, attempt: int) -> float:
        """The timeout of ``attempt`` (1, 2, …): ``first`` doubled for each retry, the last
        attempt ``timeout`` (a call slow for a reason still gets its answer)."""
        if attempt > self.max_retries:
            return self.timeout
        return min(self.timeout, first * 2.0 ** (attempt - 1))


class Gateway:
    """A ``ModelClient`` that routes roles to models and calls them through LiteLLM."""

    def __init__(self, config: GatewayConfig, journal: Journal | None = None):
        self.config = config
        self.journal = journal or NullJournal()
        self._keys: dict[str, int] = {}
        self._lock = threading.Lock()

    def model_for(self, role: str) -> str:
        try:
            return self.config.routes[role]
        except KeyError:
            raise ModelError(f"no model is configured for the role {role!r}") from None

    def _key(self, role: str, key: str | None) -> str:
        base = key or role
        with self._lock:
            n = self._keys.get(base, 0)
            self._keys[base] = n + 1
        return base if n == 0 else f"{base}#{n}"

    # --- the client contract ----------------------------------------------------------------
    @overload
    def complete(self, role: str, messages: list[dict[str, str]], *, schema: None = None,
                 key: str | None = None) -> Reply[None]: ...

    @overload
    def complete(self, role: str, messages: list[dict[str, str]], *, schema: type[Schema],
                 key: str | None = None) -> Reply[Schema]: ...

    def complete(self, role: str, messages: list[dict[str, str]], *,
                 schema: type[BaseModel] | None = None,
                 key: str | None = None) -> Reply[BaseModel | None]:
        model = self.model_for(role)
        key = self._key(role, key)
        if schema is None:
            return Reply(text=self._call(key, role, model, messages).response, data=None)
        native = _supports_schema(model)
        msgs = list(messages)
        response_format: dict[str, Any] | None = None
        if native:
            response_format = {"type": "json_schema", "json_schema": {
                "name": schema.__name__, "schema": json_schema(schema), "strict": False}}
        else:
            msgs = [*msgs, {"role": "user", "content": schema_instructions(schema)}]
        first = self._call(key, role, model, msgs, schema=schema, response_format=response_format)
        try:
            return Reply(text=first.response, data=parse_structured(first.response, schema))
        except ParseError as exc:
            problem = str(exc)
        retry_msgs = [*msgs, {"role": "assistant", "content": first.response},
                      {"role": "user", "content": (
                          f"That reply could not be used: {problem}. Reply again with only the "
                          f"JSON object, valid against the {schema.__name__} schema.")}]
        second = self._call(f"{key}/retry", role, model, retry_msgs, schema=schema,
                            response_format=response_format)
        try:
            return Reply(text=second.response, data=parse_structured(second.response, schema))
        except ParseError as exc:
            raise StructuredOutputError(
                f"The {role} model ({model}) did not return a valid {schema.__name__} "
                f"after one retry: {exc}") from exc

    # --- one logical call (with its retries) ----------------------------------------------------
    def _call(self, key: str, role: str, model: str, messages: list[dict[str, str]], *,
              schema: type[BaseModel] | None = None,
              response_format: dict[str, Any] | None = None) -> CallOutcome:
        outcome = self.journal.replay(key, role, model, messages)
        if outcome is None:
            self.journal.before_call(key, role, model)
            outcome = self._invoke(role, model, messages, schema, response_format)
            # The journal is the trace people read: it keeps the prompt with secrets blanked.
            outcome.messages = redact_messages(outcome.messages)
            self.journal.record(key, outcome)
            log.info("model call key=%s role=%s model=%s tokens=%d+%d cost=$%.6f latency=%dms "
                     "attempts=%d%s", key, role, model, outcome.prompt_tokens,
                     outcome.completion_tokens, outcome.cost_usd, outcome.latency_ms,
                     outcome.attempts, f" error={outcome.error}" if outcome.error else "")
        if outcome.error:
            raise ModelError(outcome.error, retryable=outcome.retryable)
        return outcome

    def _invoke(self, role: str, model: str, messages: list[dict[str, str]],
                schema: type[BaseModel] | None,
                response_format: dict[str, Any] | None) -> CallOutcome:
        cfg = self.config
        # Every model call, the offline model's too: the same code waits seconds on a provider.
        netguard.before_network(f"A model call for the {role} role ({model})")
        outcome = CallOutcome(role=role, model=model, messages=messages)
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "timeout": cfg.timeout,
                                  "num_retries": 0, **cfg.extra}
        if response_format is not None:
            kwargs["response_format"] = response_format
        if is_in_process(model):
            kwargs["metadata"] = {"quorum_role": role,
                                  "quorum_schema": schema.__name__ if schema else None}
        else:
            base = cfg.api_base or os.environ.get("OPENAI_API_BASE", "")
            if cfg.api_base:
                kwargs["api_base"] = cfg.api_base
            if not cfg.allow_network and not (base and _is_loopback(base)):
                outcome.error = (f"Model requests are blocked here (QUORUM_ALLOW_MODEL_REQUESTS"
                                 f" is false): refusing to call {model}.")
                outcome.attempts = 0
                return outcome
        if is_offline(model):
            with turns.waiting():
                return _offline(outcome, kwargs)
        completion, retryable = _litellm().completion, _retryable()
        first = cfg.stall_timeout(model) if cfg.stall_timeout is not None else cfg.timeout
        timeout_error = _litellm().Timeout
        started = time.monotonic()
        for attempt in range(1, cfg.max_retries + 2):
            outcome.attempts = attempt
            kwargs["timeout"] = limit = cfg.attempt_timeout(first, attempt)
            try:
                # The whole call is a wait, LiteLLM's own work included: measured faster than
                # giving the turn up for the HTTP request alone (docs/BENCHMARKS.md, "Fifth
                # round: turns").
                with turns.waiting(), ours():
                    response = completion(**kwargs)
            except retryable as exc:
                outcome.error, outcome.retryable = redact(_describe(exc)), True
                if attempt > cfg.max_retries:
                    break
                if isinstance(exc, timeout_error) and limit < cfg.timeout:
                    # Nothing received for far longer than this model takes: a lost request
                    # rather than a busy provider, so the retry goes out at once.
                    log.warning("model call role=%s model=%s: nothing received in %.0f s "
                                "(attempt %d); retrying", role, model, limit, attempt)
                    continue
                with turns.waiting():
                    time.sleep(_backoff(exc, attempt, cfg.retry_base_delay))
                continue
            except Exception as exc:  # terminal: auth, bad request, unknown model, ...
                outcome.error, outcome.retryable = redact(_describe(exc)), False
                break
            outcome.error, outcome.retryable = "", False
            outcome.response = response.choices[0].message.content or ""
            usage = getattr(response, "usage", None)
            outcome.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            outcome.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            outcome.cost_usd = _cost(response, model)
            break
        outcome.latency_ms = int((time.monotonic() - started) * 1000)
        return outcome


def _offline(outcome: CallOutcome, kwargs: dict[str, Any]) -> CallOutcome:
    """A call of the built-in offline model, made directly: LiteLLM (seconds to import) is
    not loaded for it. The same reply and usage as through its LiteLLM provider; cost 0."""
    meta = kwargs.get("metadata") or {}
    started = time.monotonic()
    try:
        outcome.response, outcome.prompt_tokens, outcome.completion_tokens = offline.complete(
            meta.get("quorum_role", ""), meta.get("quorum_schema"), kwargs["messages"],
            kwargs.get("timeout"), model=kwargs.get("model", ""))
    except Exception as exc:  # noqa: BLE001 - a handler's bug: the call's error, as via LiteLLM
        outcome.error, outcome.retryable = redact(_describe(exc)), False
    outcome.latency_ms = int((time.monotonic() - started) * 1000)
    return outcome


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    message = str(exc).replace("litellm.", "").strip()
    while message.startswith(f"{name}: "):  # LiteLLM nests the class name once per layer
        message = message[len(name) + 2:]
    # The first line says what happened; LiteLLM may append a whole traceback to it.
    message = message.split("\n", 1)[0].strip()
    # LiteLLM may append the raw response object or a repeat of the error: not for a person.
    message = re.sub(r",?\s*Received response - <.*$", "", message)
    message = re.sub(r"\s*Error_str: .*$", "", message)
    return f"{name}: {message[:800]}"


def _backoff(exc: Exception, attempt: int, base: float) -> float:
    """How long to wait before the next attempt: what the provider asked for (Retry-After,
    capped at a minute), else exponential from ``base``. LiteLLM keeps the provider's headers
    in ``litellm_response_headers``; its ``exc.response`` is a stand-in without them."""
    for headers in (getattr(exc, "litellm_response_headers", None),
                    getattr(getattr(exc, "response", None), "headers", None)):
        try:
            if headers and headers.get("retry-after-ms"):
                return min(float(headers["retry-after-ms"]) / 1000, 60.0)
            if headers and headers.get("retry-after"):
                return min(float(headers["retry-after"]), 60.0)
        except (TypeError, ValueError):  # an HTTP date or junk: fall back to our own backoff
            pass
    return base * 2.0 ** (attempt - 1)


def _cost(response: Any, model: str) -> float:
    """The call's cost: LiteLLM's own figure for this response when it computed one, else the
    model's price (looked up once per model, ``pricing``); a model missing from the price map
    counts as 0, with a warning once per model."""
    return pricing.cost(response, model)
