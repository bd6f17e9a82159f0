"""Test settings and fixtures. Users follow one convention: Alice owns the runs, Bob is
another signed-in user, and anonymous visitors have no session at all."""

import pytest

from tests.scripted import ScriptedProvider

PASSWORD = "correct-horse-battery"  # noqa: S105 - test fixture


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password=PASSWORD)


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password=PASSWORD)


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


@pytest.fixture
def scripted():
    """A scripted model behind LiteLLM's real call path: ``scripted/<name>`` models."""
    provider = ScriptedProvider.install()
    yield provider
    provider.uninstall()


OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "synthesizer": "offline/default"}


def scripted_models(name: str = "main") -> dict[str, str]:
    return {role: f"scripted/{name}" for role in OFFLINE}


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="session")
def redis_server(stack_dir):
    from tests.stack import start_redis

    proc = start_redis(stack_dir)
    yield proc
    proc.stop()
