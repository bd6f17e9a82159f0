"""Quorum settings. Every value comes from the environment (see README, "Configuration").

Defaults make a fresh clone work with no configuration at all: SQLite under ``var/``,
the embedded Redis started by ``make dev``, and the built-in offline model.
"""

import os
import re
import sys
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONCE, NONE, SELF

from config.env import Env

# LiteLLM downloads its price map at import unless told not to; set it before any import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("QUORUM_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

env = Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

DEBUG = env.bool("DEBUG", default=False)
_DEV_SECRET = "insecure-dev-key-set-SECRET_KEY-in-production"  # noqa: S105 - dev only
SECRET_KEY = env.str("SECRET_KEY", default=_DEV_SECRET if DEBUG else "")
if not SECRET_KEY:
    raise environ.ImproperlyConfigured("Set SECRET_KEY (or DEBUG=true for local development).")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Daphne's app only swaps `runserver` for its ASGI one and imports Twisted at start-up (about
# 30 MB and half a second): only `manage.py runserver` (and `help`, which lists it) load it.
# The servers run the `daphne` program, which needs no app; the other commands (CLI reviews,
# migrate), the Celery workers and the tests start without it.
_PROGRAM = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
_COMMAND = sys.argv[1] if _PROGRAM == "manage.py" and len(sys.argv) > 1 else ""
INSTALLED_APPS = [
    *(["daphne"] if _PROGRAM == "manage.py" and _COMMAND in ("", "runserver", "help") else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "axes",
    "agents_app",
    "reviews_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "agents_app.middleware.MethodNotAllowedPage",  # a 405 says why instead of a blank page
    # Under DEBUG too, a missing page is the app's 404 page, not Django's technical one.
    "agents_app.middleware.NotFoundPage",
    # A form past Django's limits: 413 said plainly, before any view (and the CSRF check).
    "agents_app.middleware.FormOverLimits",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into the 429 page
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The pattern packages keep their run-page panels beside their code ("<key>/panel.html");
        # the review app's feature packages keep their templates in their own ``templates``
        # folder, under the names they always had ("reviews_app/rules.html").
        "DIRS": [BASE_DIR / "templates", BASE_DIR / "agents_app" / "patterns",
                 *sorted((BASE_DIR / "reviews_app").glob("*/templates"))],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",
                "agents_app.inbox_views.inbox_count",
            ],
        },
    }
]

# --- Database -------------------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'quorum.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers work while the worker writes; IMMEDIATE transactions take the write
    # lock up front so concurrent writers queue on the busy timeout instead of deadlocking.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # A file (not :memory:) so the Celery worker and Daphne of integration tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-quorum.sqlite3")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
# PostgreSQL: each process keeps a pool of at most QUORUM_DB_POOL_SIZE connections (Django's
# own pool, psycopg_pool), and a thread holds one only while it works with the database: a run
# waiting on its model, a child process or a person holds none (common/dbpool.py gives it
# back before every wait). Every process that uses the database has its own pool, so
# processes × QUORUM_DB_POOL_SIZE must stay under the server's max_connections (README,
# "Production"). 0: no pool, a connection per thread as before (CONN_MAX_AGE applies).
QUORUM_DB_POOL_SIZE = env.int("QUORUM_DB_POOL_SIZE", default=10, high=1000)
QUORUM_DB_POOL_TIMEOUT = env.float("QUORUM_DB_POOL_TIMEOUT", default=30.0, high=3600.0)
# Behind PgBouncer in transaction mode (or another transaction pooler): no server-side
# cursors (a named cursor outlives the transaction that opened it), and the engine's
# statements are not prepared on the server (agents_app/prepared.py). See README,
# "Production".
QUORUM_DB_TRANSACTION_POOLER = env.bool("QUORUM_DB_TRANSACTION_POOLER", default=False)
# PostgreSQL: a model call's record (its journal row, the run's counters, its event) commits
# without waiting for its WAL flush (``SET LOCAL synchronous_commit TO OFF``). Only a crash of
# the database server can lose it (the last ~0.6 s of such commits): the stage it belonged to
# has not committed either and runs again, calling that model again. Claims, stage commits,
# decisions and everything else still wait for the flush. README, "Production".
QUORUM_DB_ASYNC_CALL_RECORDS = env.bool("QUORUM_DB_ASYNC_CALL_RECORDS", default=True)
# A worker going on in place commits a stage that leads to another in a committer thread while
# the next stage's first model call is out (agents_app/engine/ahead.py): nothing of the next
# stage is written before that commit has succeeded. QUORUM_COMMIT_AHEAD_THREADS committer
# threads per process, each holding a connection only while it commits. README, "Production".
# On by default on PostgreSQL only: on SQLite a commit is a local write (~0.5 ms), no more than
# the check before going ahead costs (docs/BENCHMARKS.md, "Issue 37, fourth round").
QUORUM_COMMIT_AHEAD = env.bool(
    "QUORUM_COMMIT_AHEAD",
    default=DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql")
QUORUM_COMMIT_AHEAD_THREADS = max(1, env.int("QUORUM_COMMIT_AHEAD_THREADS", default=4, high=64))
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    if QUORUM_DB_POOL_SIZE:
        if DATABASES["default"]["CONN_MAX_AGE"]:
            raise environ.ImproperlyConfigured(
                "CONN_MAX_AGE must be 0 with the connection pool (QUORUM_DB_POOL_SIZE > 0): "
                "pooled connections are kept by the pool, not by the thread.")
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(2, QUORUM_DB_POOL_SIZE), "max_size": QUORUM_DB_POOL_SIZE,
            "timeout": QUORUM_DB_POOL_TIMEOUT}
    if QUORUM_DB_TRANSACTION_POOLER:
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, Channels, Celery ----------------------------------------------------------
EMBEDDED_REDIS_PORT = env.port("QUORUM_EMBEDDED_REDIS_PORT", default=6399)
REDIS_URL = env.str("REDIS_URL", default=f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_TASK_ACKS_LATE = True  # a task killed mid-stage is delivered again
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "sweep-stuck-runs": {"task": "agents_app.tasks.sweep_stuck_runs", "schedule": 60.0},
}

# --- Models and runs ------------------------------------------------------------------
OFFLINE_MODEL = "offline/default"


def _default_model() -> str:
    """The offline model unless some provider key is configured."""
    if env.str("QUORUM_DEFAULT_MODEL", default=""):
        return env.str("QUORUM_DEFAULT_MODEL")
    if env.str("OPENAI_API_KEY", default=""):
        return "gpt-4o-mini"
    if env.str("ANTHROPIC_API_KEY", default=""):
        return "anthropic/claude-3-5-haiku-latest"
    if env.str("GEMINI_API_KEY", default=""):
        return "gemini/gemini-2.0-flash"
    return OFFLINE_MODEL


def _cheap_model(default: str) -> str:
    """The cheaper model for light roles (the style reviewer): the same provider's small one."""
    if env.str("QUORUM_CHEAP_MODEL", default=""):
        return env.str("QUORUM_CHEAP_MODEL")
    if default.startswith(("anthropic/", "claude")):
        return "anthropic/claude-3-5-haiku-latest"
    if default.startswith("gemini/"):
        return "gemini/gemini-2.0-flash"
    if default.startswith(("gpt-", "openai/", "o1", "o3", "o4")):
        return "gpt-4o-mini"
    return default


def _other_family_model(default: str) -> str:
    """A reviewer for code changes from another model family than the default (the executor's),
    when a second provider's key is set; otherwise the default itself (the start form warns)."""
    if env.str("QUORUM_MODEL_REVIEWER", default=""):
        return env.str("QUORUM_MODEL_REVIEWER")
    is_anthropic = default.startswith(("anthropic/", "claude"))
    if not is_anthropic and env.str("ANTHROPIC_API_KEY", default=""):
        return "anthropic/claude-3-5-sonnet-latest"
    if is_anthropic and env.str("OPENAI_API_KEY", default=""):
        return "gpt-4o"
    if not default.startswith("gemini/") and env.str("GEMINI_API_KEY", default=""):
        return "gemini/gemini-2.0-flash"
    return default


QUORUM_DEFAULT_MODEL = _default_model()
QUORUM_CHEAP_MODEL = _cheap_model(QUORUM_DEFAULT_MODEL)
# Each role of each pattern (agents_app/patterns/registry.py) gets QUORUM_MODEL_<ROLE>, else
# the kind of model its pattern asks for: the default, the cheap one for light work, or (for a
# reviewer) one from another family than the executor's. A role's kind is read when the role
# is first looked up (agents_app/patterns/role_models.py): the settings load no pattern.
def _role_models():
    from agents_app.patterns.role_models import RoleModels, overrides_from

    executor = env.str("QUORUM_MODEL_EXECUTOR", default=QUORUM_DEFAULT_MODEL)
    return RoleModels({"default": QUORUM_DEFAULT_MODEL, "cheap": QUORUM_CHEAP_MODEL,
                       "other-family": _other_family_model(executor)},
                      overrides_from(os.environ))


QUORUM_ROLE_MODELS = _role_models()
# One OpenAI-compatible base URL for every non-offline call (a gateway or a local server).
QUORUM_API_BASE = env.str("QUORUM_API_BASE", default="")
QUORUM_LLM_TIMEOUT = env.float("QUORUM_LLM_TIMEOUT", default=120.0)
QUORUM_LLM_MAX_RETRIES = env.int("QUORUM_LLM_MAX_RETRIES", default=2)
QUORUM_LLM_RETRY_BASE_DELAY = env.float("QUORUM_LLM_RETRY_BASE_DELAY", default=1.0)
# A call that has received nothing for QUORUM_LLM_STALL_FACTOR × the model's p99 latency (its
# successful first attempts in the journal), and at least QUORUM_LLM_STALL_FLOOR seconds, is
# given up and retried (issue 37: one lost request stalled a run for the whole 120 s). Each
# retry waits twice as long, the last one QUORUM_LLM_TIMEOUT. 0: always QUORUM_LLM_TIMEOUT.
QUORUM_LLM_STALL_FACTOR = env.float("QUORUM_LLM_STALL_FACTOR", default=3.0, high=1000.0)
QUORUM_LLM_STALL_FLOOR = env.float("QUORUM_LLM_STALL_FLOOR", default=15.0)
# Tests set this to False: then only the offline model and loopback base URLs are called.
QUORUM_ALLOW_MODEL_REQUESTS = env.bool("QUORUM_ALLOW_MODEL_REQUESTS", default=True)
QUORUM_OFFLINE_LATENCY = env.float("QUORUM_OFFLINE_LATENCY", default=0.0, high=600.0)
# A provider or model call made inside a database transaction raises instead of holding the
# transaction's locks for the whole wait (common/netguard.py). On under DEBUG and in tests.
QUORUM_NET_GUARD = env.bool("QUORUM_NET_GUARD", default=DEBUG)
# Under DEBUG a missing page is the app's own 404 page (agents_app.middleware.NotFoundPage);
# true shows Django's technical 404 instead (it lists the URL patterns).
QUORUM_DEBUG_404 = env.bool("QUORUM_DEBUG_404", default=False)
# Tests set this to False: then code hosts (GitHub, GitLab, Forgejo) are called only on
# loopback addresses (the test suite's fake provider servers).
QUORUM_ALLOW_PROVIDER_REQUESTS = env.bool("QUORUM_ALLOW_PROVIDER_REQUESTS", default=True)

QUORUM_DEFAULT_MAX_COST_USD = env.float("QUORUM_MAX_COST_USD", default=1.0, high=1000.0)
QUORUM_DEFAULT_MAX_TOKENS = env.int("QUORUM_MAX_TOKENS", default=200_000, high=50_000_000)
# Site-wide overrides of pattern option defaults (unset: the pattern's own default).
QUORUM_MAX_STEPS = env.int("QUORUM_MAX_STEPS", default=None)
QUORUM_MAX_REPLANS = env.int("QUORUM_MAX_REPLANS", default=None)
QUORUM_MAX_RUN_SECONDS = env.float("QUORUM_MAX_RUN_SECONDS", default=300.0)
QUORUM_MAX_TASK_CHARS = env.int("QUORUM_MAX_TASK_CHARS", default=8000)
QUORUM_STAGE_LEASE_SECONDS = env.float("QUORUM_STAGE_LEASE_SECONDS", default=300.0)
# How many of a worker process's runs execute their stage's own code at once (common/turns.py);
# the others queue, and a run waiting on its model is not counted. 0: no limit.
QUORUM_WORKER_TURNS = env.int("QUORUM_WORKER_TURNS", default=1)

# --- Code review ------------------------------------------------------------------------
# Local repositories may be read only under these folders (empty: git ranges turned off).
QUORUM_REPO_ROOTS = env.list("QUORUM_REPO_ROOTS", default=[])
# Plan-execute-review: where run worktrees live, the test commands the executor and reviewer
# may run (one per line or separated by ";"; none by default, since a test run executes the
# code the model wrote), their time limit, and the execute/review round cap. Worktrees live
# outside any project by default, in the user's state folder ($XDG_STATE_HOME, else
# ~/.local/state; not a cache: a run waiting at a gate for days needs its worktree), so a test
# command run in one reads the repository's own configuration and never Quorum's
# pyproject.toml (its pytest options) from a folder above it.
_STATE_HOME = os.environ.get("XDG_STATE_HOME", "")
DEFAULT_WORKTREE_ROOT = (Path(_STATE_HOME) if os.path.isabs(_STATE_HOME)
                         else Path.home() / ".local" / "state") / "quorum" / "worktrees"
QUORUM_WORKTREE_ROOT = env.str("QUORUM_WORKTREE_ROOT", default=str(DEFAULT_WORKTREE_ROOT))
QUORUM_TEST_COMMANDS = [c.strip() for c in re.split(r"[;\n]", env.str("QUORUM_TEST_COMMANDS",
                        default="")) if c.strip()]
QUORUM_TEST_TIMEOUT = env.float("QUORUM_TEST_TIMEOUT", default=300.0)
QUORUM_CHANGE_MAX_ROUNDS = env.int("QUORUM_CHANGE_MAX_ROUNDS", default=None)  # the pattern's: 2
QUORUM_CHANGE_MAX_RUN_SECONDS = env.float("QUORUM_CHANGE_MAX_RUN_SECONDS", default=1800.0)
# Code review fixes (issue 16): the test command that proves a fix of a local git review (one
# command, split like a shell would but never run by one; empty: no tests), and the seconds
# all of one review's test runs may take. A repository's .quorum.toml [fixes] test_command is
# used only when it is this command or one of QUORUM_TEST_COMMANDS.
QUORUM_FIX_TEST_COMMAND = env.str("QUORUM_FIX_TEST_COMMAND", default="")
QUORUM_FIX_TEST_BUDGET = env.float("QUORUM_FIX_TEST_BUDGET", default=240.0)
GITHUB_TOKEN = env.str("GITHUB_TOKEN", default="")
QUORUM_GITHUB_API_URL = env.str("QUORUM_GITHUB_API_URL", default="https://api.github.com")
QUORUM_REVIEW_MAX_UPLOAD_BYTES = env.int("QUORUM_REVIEW_MAX_UPLOAD_BYTES", default=10_000_000)
QUORUM_REVIEW_MAX_BYTES = env.int("QUORUM_REVIEW_MAX_BYTES", default=1_000_000)
QUORUM_REVIEW_MAX_FILES = env.int("QUORUM_REVIEW_MAX_FILES", default=300)
QUORUM_REVIEW_MAX_LINES_PER_FILE = env.int("QUORUM_REVIEW_MAX_LINES_PER_FILE", default=2000)
QUORUM_REVIEW_HEAVY_MAX_LINES = env.int("QUORUM_REVIEW_HEAVY_MAX_LINES", default=1500)
# The daily kill switch is about money: once reviews have spent this much today (all users),
# reviews that call a priced model are refused; the offline model costs nothing and is never
# refused (CI and offline use keep working). 0 turns the cap off.
QUORUM_REVIEW_DAILY_MAX_COST_USD = env.float("QUORUM_REVIEW_DAILY_MAX_COST_USD", default=20.0)
# An optional cap on the number of reviews started per day, offline ones included: off (0)
# unless set.
QUORUM_REVIEW_DAILY_LIMIT = env.int("QUORUM_REVIEW_DAILY_LIMIT", default=0)
QUORUM_REVIEW_MIN_CONFIDENCE = env.float("QUORUM_REVIEW_MIN_CONFIDENCE", default=0.5, high=1.0)
QUORUM_REVIEW_TIMEOUT = env.float("QUORUM_REVIEW_TIMEOUT", default=180.0)
QUORUM_REVIEW_MAX_COST_USD = env.float("QUORUM_REVIEW_MAX_COST_USD", default=2.0, high=999_999.0)
QUORUM_REVIEW_MAX_TOKENS = env.int("QUORUM_REVIEW_MAX_TOKENS", default=10_000_000)
# publish (issue 15): publishing reviews to their pull requests. QUORUM_PUBLIC_URL is this
# site's address as the pull request's readers reach it (the summary links back to the review;
# no link when unset). A failed publication is retried after BASE, 2×BASE, 4×BASE… seconds (or
# the provider's Retry-After when longer), MAX_ATTEMPTS times in all; a claim older than
# LEASE seconds (a worker died mid-way) may be taken again.
QUORUM_PUBLISH_RETRY_BASE_SECONDS = env.float("QUORUM_PUBLISH_RETRY_BASE_SECONDS", default=30.0)
QUORUM_PUBLISH_MAX_ATTEMPTS = env.int("QUORUM_PUBLISH_MAX_ATTEMPTS", default=5)
QUORUM_PUBLISH_LEASE_SECONDS = env.float("QUORUM_PUBLISH_LEASE_SECONDS", default=600.0)
CELERY_BEAT_SCHEDULE["publish-sweep"] = {"task": "reviews_app.tasks.publish_sweep",
                                         "schedule": 120.0}
CELERY_BEAT_SCHEDULE["status-sweep"] = {"task": "reviews_app.tasks.status_sweep",
                                        "schedule": 120.0}
# --- Pull requests of connected repositories: the flow (issue 15) ---
# Models a repository's .quorum.toml may pick per review role, besides the server's own role
# models (comma-separated LiteLLM names); any other name is refused with a note on the review.
QUORUM_REPO_MODELS = env.list("QUORUM_REPO_MODELS", default=[])
# A pull request's file larger than this is not fetched whole (the coverage says so).
QUORUM_PR_MAX_FILE_BYTES = env.int("QUORUM_PR_MAX_FILE_BYTES", default=500_000)
# A provider error worth retrying (5xx, rate limit, network): the first wait in seconds,
# doubled per attempt (5 retries), unless the provider says how long (Retry-After).
QUORUM_PR_RETRY_SECONDS = env.float("QUORUM_PR_RETRY_SECONDS", default=30.0)
# --- Code review: connections and webhooks (issue 15, hooks) ---
# Tokens and webhook secrets stored in the database are sealed with a key derived from this
# (any string); empty: from SECRET_KEY. Changing it makes stored secrets unreadable (the
# connection's page asks for them again): set it once, apart from SECRET_KEY.
QUORUM_SECRETS_KEY = env.str("QUORUM_SECRETS_KEY", default="")
# The address providers reach Quorum at, for the webhook URL shown on a connection's page
# (e.g. https://quorum.example.org); empty: the address of the request that opened the page.
QUORUM_PUBLIC_URL = env.str("QUORUM_PUBLIC_URL", default="").rstrip("/")
# API hosts a non-staff user may connect to (staff may use any, e.g. a self-hosted Forgejo):
# Quorum sends the token there, so an ordinary user cannot point it at an internal address.
QUORUM_PROVIDER_HOSTS = [h.strip().lower() for h in env.list(
    "QUORUM_PROVIDER_HOSTS", default=["api.github.com", "gitlab.com", "codeberg.org"])
    if h.strip()]
# The largest webhook body accepted (bytes); a larger one is answered 413.
QUORUM_WEBHOOK_MAX_BYTES = env.int("QUORUM_WEBHOOK_MAX_BYTES", default=2_000_000)
# A pasted diff arrives as a form field: allow it up to the upload limit (plus the form).
DATA_UPLOAD_MAX_MEMORY_SIZE = QUORUM_REVIEW_MAX_UPLOAD_BYTES + 1_000_000

# --- Notifications (issue 35) ---------------------------------------------------------
# This site's address as a notification's reader reaches it: the links in emails and webhooks.
QUORUM_BASE_URL = env.str("QUORUM_BASE_URL", default="http://127.0.0.1:8000").rstrip("/")
# A decision link in a notification works once, for its person, for this many hours.
QUORUM_LINK_HOURS = env.float("QUORUM_LINK_HOURS", default=72.0, high=24 * 365)
# Email: a django-environ email URL (smtp+tls://user:password@host:587, consolemail://, ...);
# the default prints each email on the console of the process that sends it (`make dev`).
vars().update({k: v for k, v in env.email_url("EMAIL_URL", default="consolemail://").items()
               if v is not None})
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Quorum <quorum@localhost>")
# Delivery: each request's timeout (seconds), how many attempts in all, the first wait
# before a retry (multiplied by 4 each time, with jitter, up to the cap), and the longest
# Retry-After that is honoured.
QUORUM_NOTIFY_TIMEOUT = env.float("QUORUM_NOTIFY_TIMEOUT", default=10.0, high=120.0)
QUORUM_NOTIFY_MAX_ATTEMPTS = env.int("QUORUM_NOTIFY_MAX_ATTEMPTS", default=8)
QUORUM_NOTIFY_RETRY_SECONDS = env.float("QUORUM_NOTIFY_RETRY_SECONDS", default=30.0)
QUORUM_NOTIFY_RETRY_CAP_SECONDS = env.float("QUORUM_NOTIFY_RETRY_CAP_SECONDS", default=6 * 3600.0)
# An SMTP server that hangs must not hold a worker thread for ever (and the row's lease then
# running out, sending the email twice): email has the webhooks' timeout.
EMAIL_TIMEOUT = QUORUM_NOTIFY_TIMEOUT
# A sweep not started within its period is dropped (the next one does its work), so slow
# deliveries never pile sweeps up on the workers.
CELERY_BEAT_SCHEDULE["notify-deliver-due"] = {"task": "agents_app.notify.tasks.deliver_due",
                                              "schedule": 15.0, "options": {"expires": 15.0}}
# Gate deadlines (issue 35): reminders, escalations and default decisions fire within this
# many seconds of their time (a deadline "within 60 s" with a margin for a busy worker).
QUORUM_GATE_TIMER_SECONDS = env.float("QUORUM_GATE_TIMER_SECONDS", default=15.0)
CELERY_BEAT_SCHEDULE["gate-timers"] = {"task": "agents_app.tasks.gate_timers",
                                       "schedule": QUORUM_GATE_TIMER_SECONDS,
                                       "options": {"expires": QUORUM_GATE_TIMER_SECONDS}}

# --- Auth, static, security -----------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out sign-in
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.time_zone("TIME_ZONE", default="UTC")
USE_I18N = False
USE_TZ = True

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# Content-Security-Policy on every response (django-csp). Scripts only from our own origin or
# carrying the request's nonce, no inline style, no plugins, no framing. 'self' in connect-src
# also covers ws:/wss: of the same host (CSP Level 3; tests/test_security_browser.py checks
# the run page's WebSocket in Chromium). The page has no inline script; htmx is told not to run
# scripts that arrive in swapped fragments (allowScriptTags: false in base.html).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Sign-in throttling (django-axes): after QUORUM_LOGIN_ATTEMPTS failed sign-ins for one username,
# or from one IP address, every sign-in for it is refused (HTTP 429, the same page whether or not
# the account exists, even with the right password) for QUORUM_LOGIN_LOCKOUT_MINUTES. Attempts
# are counted in the database, so Daphne processes and workers share them. Behind a reverse
# proxy run Daphne with --proxy-headers, or every visitor has the proxy's address.
AXES_FAILURE_LIMIT = env.int("QUORUM_LOGIN_ATTEMPTS", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("QUORUM_LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"

if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
    # With HSTS on, cover subdomains and allow preloading unless told otherwise.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS",
                                              default=SECURE_HSTS_SECONDS > 0)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=SECURE_HSTS_SECONDS > 0)
# Only behind a reverse proxy that terminates HTTPS (and sets X-Forwarded-Proto, dropping any
# the client sent) is that header believed: reaching Daphne directly, anyone could send it
# and pass for https (secure cookies, the HTTPS redirect, the WebSocket's origin check).
if env.bool("QUORUM_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # One handler, on the root logger: Quorum's loggers propagate to it. A Celery worker puts
    # its own handler in the root's place, so each line is printed once there too (a handler
    # on "quorum" as well printed every line twice under `make dev`).
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "quorum": {"level": env.log_level("QUORUM_LOG_LEVEL", default="INFO")},
        # LiteLLM adds a handler of its own to this logger when it is imported: not again.
        "LiteLLM": {"level": "WARNING", "propagate": False},
    },
}
