"""What giving a pooled connection back before a wait costs (issue 37): per model call a
thread closes its Django connection (back to the pool, ``common.dbpool.release``) and its next
statement takes one again. Thread CPU and wall time of ``SELECT 1`` on a kept connection
against the same after each release, on a throwaway PostgreSQL cluster, N each, interleaved.

    .venv/bin/python tests/benchmarks/bench_pool_handoff.py [--n 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import machine, positive, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=positive(int, 10, 1_000_000), default=2000)
    parser.add_argument("--rounds", type=positive(int, 1, 50), default=5)
    args = parser.parse_args()
    from tests import pg
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-pool-") as tmp, \
            pg.PgCluster(max_connections=100) as cluster:
        setup_django(Path(tmp), free_port(), DATABASE_URL=cluster.url,
                     SECRET_KEY="bench-not-secret")
        from django.db import connection

        from common import dbpool

        assert dbpool.pooled()

        def loop(release: bool) -> tuple[float, float]:
            cpu, wall = time.thread_time(), time.perf_counter()
            for _ in range(args.n):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                if release:
                    dbpool.release()
            return ((time.thread_time() - cpu) / args.n * 1e6,
                    (time.perf_counter() - wall) / args.n * 1e6)

        loop(True)
        kept, released = [], []
        for _ in range(args.rounds):
            kept.append(loop(False))
            released.append(loop(True))
    med = statistics.median
    print(f"# bench_pool_handoff — {machine()}; load {os.getloadavg()[0]:.1f}; medians of "
          f"{args.rounds} rounds of {args.n}")
    print("| SELECT 1 | thread CPU, µs | wall, µs |")
    print("|---|---:|---:|")
    for name, rows in (("on a kept connection", kept),
                       ("after giving the connection back to the pool", released)):
        print(f"| {name} | {med(c for c, _ in rows):.0f} | {med(w for _, w in rows):.0f} |")
    print(f"| the hand-off (difference) | {med(c for c, _ in released) - med(c for c, _ in kept):.0f}"
          f" | {med(w for _, w in released) - med(w for _, w in kept):.0f} |")


if __name__ == "__main__":
    main()
