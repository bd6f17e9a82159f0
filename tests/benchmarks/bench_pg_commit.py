"""What a commit costs on PostgreSQL when it waits for its WAL flush, and when it does not
(issue 37): a throwaway cluster (tests/pg.py) with ``fsync`` and ``synchronous_commit`` on,
then one with them off, and on the first one transactions that ``SET LOCAL
synchronous_commit TO OFF`` as a model call's record does (QUORUM_DB_ASYNC_CALL_RECORDS).
Each: ``--n`` one-row INSERTs, each committed in its own transaction; p50 / p90 ms.

    .venv/bin/python tests/benchmarks/bench_pg_commit.py [--n 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import pg  # noqa: E402
from tests.benchmarks.common import machine, positive  # noqa: E402


def commits(url: str, n: int, local_off: bool) -> list[float]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)")
        times = []
        for _ in range(n):
            started = time.perf_counter()
            with conn.transaction():
                if local_off:
                    conn.execute("SET LOCAL synchronous_commit TO OFF")
                conn.execute("INSERT INTO t (v) VALUES ('x')")
            times.append(1000 * (time.perf_counter() - started))
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=positive(int, 10, 100_000), default=300)
    args = parser.parse_args()
    if pg.missing():
        sys.exit(f"bench_pg_commit: {pg.missing()}")
    rows = []
    with pg.PgCluster(fsync=True, max_connections=100) as cluster:
        rows.append(("fsync on, synchronous_commit on", commits(cluster.url, args.n, False)))
        rows.append(("fsync on, SET LOCAL synchronous_commit TO OFF",
                     commits(cluster.url, args.n, True)))
    with pg.PgCluster(fsync=False, max_connections=100) as cluster:
        rows.append(("fsync off, synchronous_commit off", commits(cluster.url, args.n, False)))
    print(f"# bench_pg_commit — {machine()}; load {os.getloadavg()[0]:.1f}; {args.n} one-row "
          "INSERTs, each its own transaction")
    print("| cluster / transaction | p50 ms | p90 ms |")
    print("|---|---:|---:|")
    for name, times in rows:
        print(f"| {name} | {statistics.median(times):.3f} | "
              f"{statistics.quantiles(times, n=10)[-1]:.3f} |")


if __name__ == "__main__":
    main()
