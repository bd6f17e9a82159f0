"""The webhook receiver: server time to answer a signed pull-request delivery (issue 15 asks
for an answer within a second, acting on it later in the worker).

A temporary SQLite database, DEBUG=false, one GitHub connection; ``--requests`` signed
"opened" deliveries of each payload size go through Django's test client (the whole
middleware stack), each with a new delivery id, so each is verified, parsed, stored and its
task queued on commit. The task is sent to a stand-in that only counts it (no Redis here;
sending to Redis adds about a millisecond). Prints p50 / p95 / max per size.

Then the same deliveries while a worker thread starts a round whose fetch of the pull
request's files takes ``--fetch-seconds`` (the fake GitHub of the tests, over HTTP): issue
31's rule that no provider call is made inside a transaction is what keeps these answers
fast on SQLite, whose one write lock a transaction holds. Prints their p50 / p95 / max and
the ratio to the idle p50 of the same run.

    .venv/bin/python tests/benchmarks/bench_webhook.py [--requests 100] [--fetch-seconds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import common  # noqa: E402
from tests.benchmarks.common import pct  # noqa: E402

SECRET = "bench-webhook-secret-0123456789"  # noqa: S105 - a throwaway connection
SIZES = {"2 KB": 2_000, "100 KB": 100_000, "1.7 MB": 1_700_000}


def payload(pad: int) -> bytes:
    body = {"action": "opened", "number": 7, "sender": {"login": "carol"},
            "repository": {"full_name": "octo/bench"},
            "pull_request": {"number": 7, "draft": False, "merged": False,
                             "head": {"sha": "a" * 40}, "base": {"sha": "b" * 40},
                             "body": "x" * pad}}
    return json.dumps(body).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--fetch-seconds", type=float, default=5.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        common.setup_django(Path(tmp), 6390, DEBUG="false", ALLOWED_HOSTS="testserver",
                            QUORUM_CONN_BENCH_SECRET=SECRET)
        from django.conf import settings
        from django.test import Client

        from reviews_app.connections import webhook
        from reviews_app.models import Connection, WebhookDelivery

        sent: list[int] = []
        webhook._enqueue = sent.append  # the worker is not part of this measure
        conn = Connection.objects.create(owner=common.make_user(), provider="github",
                                         repository="octo/bench",
                                         api_url="https://api.github.com",
                                         token_env="QUORUM_CONN_BENCH_TOKEN",
                                         secret_env="QUORUM_CONN_BENCH_SECRET")
        client = Client()
        url = f"/webhooks/github/{conn.hook_id}/"
        print(f"bench_webhook: {common.machine()}; DEBUG={settings.DEBUG}; "
              f"{args.requests} deliveries per size")
        for label, pad in SIZES.items():
            body = payload(pad)
            sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            times = []
            for _ in range(args.requests):
                start = time.perf_counter()
                answer = client.post(url, data=body, content_type="application/json",
                                     headers={"X-GitHub-Event": "pull_request",
                                              "X-Hub-Signature-256": sig,
                                              "X-GitHub-Delivery": str(uuid.uuid4())})
                times.append((time.perf_counter() - start) * 1000)
                assert answer.status_code == 202, answer.content[:200]
            print(f"  {label:>7} payload: p50 {pct(times, 50):6.1f} ms, p95 "
                  f"{pct(times, 95):6.1f} ms, max {max(times):6.1f} ms")
        stored = WebhookDelivery.objects.count()
        assert stored == len(sent) == args.requests * len(SIZES), (stored, len(sent))
        print(f"  {stored} deliveries stored, {len(sent)} tasks queued; target: under 1 s")
        idle = _times(client, url, payload(SIZES["2 KB"]), args.requests)
        during, fetch = _during_a_slow_fetch(client, url, conn, args)
        print(f"  while a round's fetch takes {fetch:.1f} s: {len(during)} deliveries, p50 "
              f"{pct(during, 50):6.1f} ms, p95 {pct(during, 95):6.1f} ms, max "
              f"{max(during):6.1f} ms; p50 {pct(during, 50) / pct(idle, 50):.2f}x the idle "
              f"p50 ({pct(idle, 50):.1f} ms) of this run")


def _times(client, url: str, body: bytes, n: int) -> list[float]:
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        answer = client.post(url, data=body, content_type="application/json",
                             headers={"X-GitHub-Event": "pull_request",
                                      "X-Hub-Signature-256": sig,
                                      "X-GitHub-Delivery": str(uuid.uuid4())})
        out.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 202, answer.content[:200]
    return out


def _during_a_slow_fetch(client, url: str, conn, args) -> tuple[list[float], float]:
    """Deliveries sent while a worker thread's round waits on a slow provider."""
    import os
    import threading

    from django.db import connection

    from reviews_app.models import Connection, WebhookDelivery
    from reviews_app.prflow import handle_delivery
    from reviews_app.prflow import status as commit_status
    from tests.fake_hosts import FakeHosts

    commit_status.send = lambda pk, countdown=None: None  # no worker here
    os.environ["QUORUM_CONN_BENCH_TOKEN"] = "bench-token"
    with FakeHosts(token="bench-token") as hosts:
        hosts.add_repo("octo/bench")
        hosts.open_pull(7, base={"README.md": "hi\n"}, head={"app.py": "x = 1\n"})
        Connection.objects.filter(pk=conn.pk).update(api_url=hosts.api_url("github"),
                                                     bot_login="quorum-bot")
        hosts.slow("/pulls/7/files", args.fetch_seconds, times=1)
        d = WebhookDelivery.objects.create(connection=conn, delivery_id="slow", event="opened",
                                           number=7)

        def work():
            try:
                handle_delivery(d.pk, enqueue=False)
            finally:
                connection.close()

        worker = threading.Thread(target=work)
        started = time.monotonic()
        worker.start()
        while not any(r.endswith("/pulls/7/files") for r in hosts.routes()):
            time.sleep(0.01)
        times = []
        body = payload(SIZES["2 KB"])
        while worker.is_alive() and len(times) < args.requests:
            times += _times(client, url, body, 1)
        worker.join()
        assert times, "the fetch ended before a delivery was sent"
        return times, time.monotonic() - started


if __name__ == "__main__":
    main()
