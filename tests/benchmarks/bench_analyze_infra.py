"""Issue 36: the analyze stage's wall time on a 10-file mixed change (Python, JavaScript, Go,
Terraform, a GitHub Actions workflow, a Kubernetes manifest, Markdown, YAML, SQL, a
Dockerfile), on at most two cores (``sched_setaffinity``), the median of ``--repeat`` runs;
and each analyzer's start-up alone: its command on one small file of its kind, the median of
``--repeat`` runs. No model call, no database.

    .venv/bin/python tests/benchmarks/bench_analyze_infra.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FILES: dict[str, list[str]] = {
    "app/users.py": ["import subprocess", "", "",
                     "def run(cmd):", "    return subprocess.call(cmd, shell=True)"]
                    + [f"def f{k}(x):\n    return x + {k}\n" for k in range(20)],
    "web/show.js": ["export function show(el, params) {", '  el.innerHTML = params.get("q");',
                    "}"] + [f"export const v{k} = {k};" for k in range(30)],
    "store/users.go": ["package store", "", 'import "database/sql"', "",
                       "func Find(db *sql.DB, id string) (*sql.Rows, error) {",
                       '\treturn db.Query("SELECT * FROM t WHERE id = $1", id)', "}"],
    "infra/main.tf": ['resource "aws_s3_bucket" "logs" {', '  bucket = "acme-logs"',
                      '  acl    = "public-read"', "}", "",
                      'resource "aws_security_group" "admin" {', "  ingress {",
                      "    from_port   = 22", "    to_port     = 22", '    protocol    = "tcp"',
                      '    cidr_blocks = ["0.0.0.0/0"]', "  }", "}"],
    ".github/workflows/greet.yml": [
        "name: greet", "on:", "  pull_request_target:", "permissions: write-all", "jobs:",
        "  greet:", "    runs-on: ubuntu-latest", "    steps:",
        "      - uses: actions/checkout@v4", "        with:",
        "          ref: ${{ github.event.pull_request.head.sha }}",
        "      - run: echo \"${{ github.event.pull_request.title }}\""],
    "deploy/web.yaml": ["apiVersion: apps/v1", "kind: Deployment", "metadata:", "  name: web",
                        "spec:", "  template:", "    spec:", "      hostNetwork: true",
                        "      containers:", "        - name: web", "          image: nginx",
                        "          securityContext:", "            privileged: true"],
    "docs/guide.md": ["# Guide", "", "How to recieve notifications.", "", "## Setup", "",
                      "Run `make dev`."] + [f"- item {k}" for k in range(30)],
    "config/app.yml": ["database:", "  host: db", "  port: 5432", "  host: other"]
                      + [f"key_{k}: value_{k}" for k in range(30)],
    "db/001_init.sql": ["BEGIN;", "DELETE FROM sessions;",
                        "GRANT SELECT ON users TO PUBLIC;", "COMMIT;"],
    "Dockerfile": ["FROM python:3.11-slim", "RUN pip install flask", "COPY . /app",
                   'CMD ["python", "/app/main.py"]'],
}
ONE_FILE = {"python": ("a.py", "x = 1\n"), "javascript": ("a.js", "export const x = 1;\n"),
            "go": ("a.go", "package a\n"), "terraform": ("a.tf", 'locals { x = 1 }\n'),
            "workflow": ("a.yml", "name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                                  "    steps:\n      - run: echo hi\n"),
            "yaml": ("a.yaml", "a: 1\n"), "markdown": ("a.md", "# Title\n\nText.\n"),
            "text": ("a.rst", "Title\n=====\n"), "sql": ("a.sql", "SELECT 1;\n"),
            "shell": ("a.sh", "echo hi\n"), "dockerfile": ("Dockerfile", "FROM x:1\n"),
            "other": ("a.txt", "hello\n")}


def diff_text() -> str:
    parts = []
    for path, lines in FILES.items():
        body = "".join(f"+{ln}\n" for ln in "\n".join(lines).split("\n"))
        n = body.count("\n")
        parts.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                     f"+++ b/{path}\n@@ -0,0 +1,{n} @@\n{body}")
    return "".join(parts)


def startups(repeat: int) -> dict[str, float]:
    """Each tool alone on one small file of the first kind it reads (median seconds)."""
    from common import proc
    from common.analyzers.runner import find_tool, private_dirs
    from common.analyzers.tools import TOOLS

    out = {}
    for tool in TOOLS:
        exe = find_tool(tool.name)
        kind = next(k for k in ONE_FILE if k in tool.kinds)
        name, text = ONE_FILE[kind]
        times = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                (work / name).write_text(text)
                argv = tool.command(exe, [name], work)
                started = time.perf_counter()
                proc.run(argv, cwd=work, timeout=60, home=str(work),
                         env={**tool.env, **private_dirs(work)})
                times.append(time.perf_counter() - started)
        out[tool.name] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))[:2]
        os.sched_setaffinity(0, cores)  # children inherit it
    os.chdir(ROOT)
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
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"files={len(prepared.files)} cores={cores} load={os.getloadavg()[0]:.1f}")
    print(f"analyze stage: wall median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}, max {max(walls):.2f}), analyzers' CPU median "
          f"{statistics.median(cpus):.2f} s")
    print(f"tools: {', '.join(sorted(analysis['tools']))}; results: "
          f"{len(analysis['evidence'])}; files an analyzer examined: "
          f"{len(analysis['examined'])} of {len(prepared.files)}")
    by_file: dict[str, list[str]] = {}
    for e in analysis["evidence"]:
        by_file.setdefault(e["file"], []).append(f"{e['rule']}@{e['line']}")
    for path in FILES:
        print(f"  {path}: {', '.join(by_file.get(path, [])) or '-'}")
    print("start-up alone (one small file, median):")
    for name, seconds in startups(args.repeat).items():
        print(f"  {name:15s} {seconds:.3f} s")


if __name__ == "__main__":
    main()
