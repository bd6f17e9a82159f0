"""No network call inside a database transaction (common/netguard.py): the code-host clients
and the model gateway refuse to make one under the tests (and DEBUG), and a real provider is
never called from a test."""

from __future__ import annotations

import pytest
from django.db import transaction

from agents_app.llm.gateway import Gateway, GatewayConfig
from common import netguard
from reviews_app import hosting
from reviews_app.hosting.base import HostError, RepoRef
from tests.fake_hosts import FakeHosts

pytestmark = pytest.mark.django_db


@pytest.fixture
def hosts():
    with FakeHosts(token="t0ken") as fake:
        fake.add_repo("octo/demo")
        fake.open_pull(7, base={"a.py": "x = 1\n"}, head={"a.py": "x = 2\n"})
        yield fake


@pytest.mark.parametrize("provider", ["github", "gitlab", "forgejo"])
def test_a_provider_call_inside_a_transaction_raises_and_sends_nothing(hosts, provider):
    client = hosting.client_for(hosts.repo_ref(provider))
    try:
        assert client.pull(7).number == 7  # outside a transaction: fine
        before = len(hosts.requests)
        with pytest.raises(netguard.NetworkInTransaction, match="inside a database "
                                                                "transaction"), \
                transaction.atomic():
            client.pull_files(7)
        assert len(hosts.requests) == before  # refused before anything left the process
    finally:
        client.close()


def test_a_model_call_inside_a_transaction_raises():
    gateway = Gateway(GatewayConfig(routes={"planner": "offline/default"}))
    messages = [{"role": "user", "content": "Plan a picnic"}]
    assert gateway.complete("planner", messages).text  # outside: fine
    with pytest.raises(netguard.NetworkInTransaction, match="model call for the planner"), \
            transaction.atomic():
        gateway.complete("planner", messages)


def test_a_real_provider_is_never_called_from_a_test():
    client = hosting.client_for(RepoRef("github", "https://api.github.com", "octo/demo",
                                        token="t"))
    try:
        with pytest.raises(HostError, match="blocked here") as caught:
            client.pull(1)
        assert not caught.value.retryable
    finally:
        client.close()
