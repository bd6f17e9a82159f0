"""The analyze stage's wall time on a 10-file mixed-language change (3 Python, 2 TypeScript,
1 JavaScript, 1 Go, 1 shell, 1 Dockerfile, 1 YAML; new files of 40-120 lines), and the CPU
time of the analyzers it starts, the median of ``--repeat`` runs. No model call, no database.

``--root`` picks the checkout whose code runs (default: this one), so the stage of another
branch can be measured on the same change and the same host:

    .venv/bin/python tests/benchmarks/bench_analyze_stage.py [--repeat 5] [--root /work/main]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path


def _py(i: int) -> list[str]:
    out = ["import subprocess", "", ""]
    for k in range(8):
        out += [f"def job_{i}_{k}(cursor, name, items):", '    """Count things."""',
                "    total = 0", "    for item in items:", "        total += len(str(item))",
                "    cursor.execute(\"select 1 from t where n = '%s'\" % name)"
                if k == 0 else "    cursor.execute('select 1')", "    return total", ""]
    return out


def _ts(i: int) -> list[str]:
    out = []
    for k in range(10):
        out += [f"export async function find{i}x{k}(db: any, id: string): Promise<unknown> {{",
                "  const rows = await db.query(`select * from users where id = ${id}`);"
                if k == 0 else '  const rows = await db.query("select 1 where id = $1", [id]);',
                "  if (!rows) { return null; }", "  return rows;", "}", ""]
    return out


def _js() -> list[str]:
    out = []
    for k in range(10):
        out += [f"export function show{k}(el, params) {{",
                '  el.innerHTML = params.get("q");' if k == 0 else
                '  el.textContent = params.get("q");', "  return el;", "}", ""]
    return out


def _go() -> list[str]:
    out = ["package store", "", "import (", '\t"database/sql"', '\t"fmt"', ")", ""]
    for k in range(10):
        out += [f"func Find{k}(db *sql.DB, id string) (*sql.Rows, error) {{",
                '\treturn db.Query(fmt.Sprintf("SELECT * FROM t WHERE id = \'%s\'", id))'
                if k == 0 else '\treturn db.Query("SELECT * FROM t WHERE id = $1", id)', "}", ""]
    return out


FILES = {**{f"app/mod_{i}.py": _py(i) for i in range(3)},
         **{f"web/api_{i}.ts": _ts(i) for i in range(2)},
         "web/show.js": _js(), "store/users.go": _go(),
         "scripts/deploy.sh": ["#!/bin/bash", "set -eu", 'eval "$1"'] +
                              [f'echo "step {k}: ${{HOME}}"' for k in range(40)],
         "Dockerfile": ["FROM python:3.11-slim", "RUN pip install --no-cache-dir flask",
                        "COPY . /app", 'CMD ["python", "/app/main.py"]'],
         "config/app.yaml": [f"key_{k}: value_{k}" for k in range(40)]}


def diff_text() -> str:
    parts = []
    for path, lines in FILES.items():
        body = "".join(f"+{ln}\n" for ln in lines)
        parts.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                     f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    os.chdir(args.root)
    from reviews_app.pipeline.diffs import prepare
    from reviews_app.pipeline.pattern import CodeReview

    prepared = prepare(diff_text())
    pattern = CodeReview()
    walls, cpus, result = [], [], None
    for _ in range(args.repeat):
        state = pattern.initial_state("bench", {"input": {
            "label": "bench", "files": prepared.files, "coverage": prepared.coverage}})
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        result = pattern.run_stage("analyze", state, None)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    analysis = result.state["analysis"]
    print(f"root={args.root} files={len(prepared.files)} load={os.getloadavg()[0]:.1f} "
          f"cpus={os.cpu_count()}")
    print(f"analyze stage: wall median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}), analyzers' CPU median {statistics.median(cpus):.2f} s")
    print(f"tools: {', '.join(sorted(analysis['tools']))}; results: "
          f"{len(analysis['evidence'])}; files an analyzer examined: "
          f"{len(analysis['examined'])} of {len(prepared.files)}")
    print(f"event: {result.events[0].message}")


if __name__ == "__main__":
    main()
