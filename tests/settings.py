"""Test settings: the real settings, read under a test environment."""

import os

os.environ.setdefault("DEBUG", "true")  # plain static storage; pytest-django runs DEBUG=False
os.environ.setdefault("SECRET_KEY", "test-secret-key")
os.environ["QUORUM_ALLOW_MODEL_REQUESTS"] = "false"  # no real provider request from a test
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["QUORUM_LLM_RETRY_BASE_DELAY"] = "0"
os.environ["QUORUM_NET_GUARD"] = "true"  # a provider or model call in a transaction raises
os.environ["QUORUM_ALLOW_PROVIDER_REQUESTS"] = "false"  # only the fake hosts on loopback
for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "QUORUM_DEFAULT_MODEL",
            "DATABASE_URL", "QUORUM_OFFLINE_LATENCY"):
    os.environ.pop(key, None)

import socket  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Integration tests start a real Redis on this port (tests/stack.py); the test process's
# Celery broker and channel layer point at it from the start. Under pytest-xdist each worker
# has its own Redis (and pytest-django gives each its own database file, ``..._gw0``).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["QUORUM_TEST_REDIS_PORT"] = str(_free_port())
else:
    os.environ.setdefault("QUORUM_TEST_REDIS_PORT", str(_free_port()))
os.environ["REDIS_URL"] = f"redis://127.0.0.1:{os.environ['QUORUM_TEST_REDIS_PORT']}/0"

from config.settings import *  # noqa: E402,F403

# MD5 first for fast test users; PBKDF2 too, so browser tests can make hashes Daphne accepts.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
