"""The LangGraph side of bench_vs_langgraph: the same four-call Plan-and-Execute graph as
Quorum's pattern (start → plan → step → step → synthesize; planner, two executor calls,
synthesizer), as a LangGraph StateGraph checkpointed to SQLite (``SqliteSaver``) or, given a
PostgreSQL connection string, to PostgreSQL (``PostgresSaver``, langgraph-checkpoint-postgres),
whose nodes call LiteLLM against the same fake OpenAI-compatible provider.

Only the benchmark imports this module (LangGraph is a benchmark-only dependency:
requirements-bench.lock, installed by ``make bench``). Run as a script it is the "worker" of
the concurrent figures: N runs at once with ``asyncio.gather`` of ``ainvoke`` on an
``AsyncSqliteSaver`` (``--db``) or an ``AsyncPostgresSaver`` on a connection pool of at most
``PG_POOL_MAX`` connections (``--pg``), printing one JSON line (makespan, CPU, peak RSS) so
that its CPU and memory are its own, as a Celery worker's are.

    python tests/benchmarks/langgraph_side.py --url http://127.0.0.1:PORT/v1 --n 200 --db x.sqlite3
    python tests/benchmarks/langgraph_side.py --url ... --n 200 --pg "host=... dbname=langgraph"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # as the app's settings do

import litellm  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

# The pattern's own schemas and prompt texts (plain Python, no Django): the same requests.
from agents_app.patterns.plan_execute.pattern import PlanDraft, StepReport  # noqa: E402
from agents_app.patterns.plan_execute.prompts import (  # noqa: E402
    CURRENT,
    EARLIER,
    EXECUTOR_SYSTEM,
    INSTRUCTION,
    OUTPUTS,
    PLAN,
    PLANNER_SYSTEM,
    SYNTHESIZER_SYSTEM,
    TASK,
    _numbered,
    _section,
)
from agents_app.patterns.structured import parse_structured, schema_instructions  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False
# The fakes are models LiteLLM cannot price. Quorum registers such a model with LiteLLM at a
# price of 0 after its first call (agents_app/llm/pricing.py), which spares LiteLLM failing
# model-info lookups on every later call (~10 % of its CPU per call); any LiteLLM user can do
# the same with ``register_model``, so the LangGraph side does it too, and both sides pay
# LiteLLM the same per call.
litellm.register_model({f"openai/fake-{role}": {
    "litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0, "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0} for role in ("planner", "executor", "synthesizer")})

# Two steps: planner + 2 executor calls + synthesizer = 4 model calls, 5 stages.
# The batch's AsyncConnectionPool: at most 20 connections, which with Quorum's own pools (each
# process at most QUORUM_DB_POOL_SIZE) keeps within PostgreSQL's stock max_connections = 100
# on the cluster the two share. AsyncPostgresSaver holds an asyncio.Lock around each of its
# statements (langgraph/checkpoint/postgres/aio.py, ``_cursor``), so one saver uses one pooled
# connection at a time whatever the pool's size: this is the package's documented way.
PG_POOL_MAX = 20

TASK_TEXT = "Collect the logs of service {i}, then write a report on the errors."
API_KEY = "sk-bench-fake"


class PlanState(TypedDict, total=False):
    task: str
    steps: list[str]
    results: list[dict[str, Any]]
    answer: str


def _planner(state: PlanState) -> list[dict[str, str]]:
    user = _section(TASK, state["task"]) + "\n" + _section(INSTRUCTION, "Write the plan.")
    return [{"role": "system", "content": PLANNER_SYSTEM.format(max_steps=10)},
            {"role": "user", "content": user},
            {"role": "user", "content": schema_instructions(PlanDraft)}]


def _executor(state: PlanState) -> list[dict[str, str]]:
    steps, results = state["steps"], state.get("results", [])
    index = len(results)
    prior = "\n\n".join(f"### Step {i} — {r['description']}\n{r['output']}"
                        for i, r in enumerate(results, 1)) or "(none yet)"
    user = "\n".join([_section(TASK, state["task"]), _section(PLAN, _numbered(steps)),
                      _section(EARLIER, prior), _section(CURRENT, f"{index + 1}. {steps[index]}")])
    return [{"role": "system", "content": EXECUTOR_SYSTEM}, {"role": "user", "content": user},
            {"role": "user", "content": schema_instructions(StepReport)}]


def _synthesizer(state: PlanState) -> list[dict[str, str]]:
    outputs = "\n\n".join(f"### {r['description']}\n{r['output']}" for r in state["results"])
    return [{"role": "system", "content": SYNTHESIZER_SYSTEM},
            {"role": "user", "content": _section(TASK, state["task"]) + "\n"
             + _section(OUTPUTS, outputs)}]


def _after_step(state: PlanState) -> str:
    return "step" if len(state["results"]) < len(state["steps"]) else "synthesize"


def _text(response: Any) -> str:
    return response.choices[0].message.content or ""


def build(url: str, *, asynchronous: bool) -> StateGraph:
    """The graph; its nodes call ``litellm.completion`` (or ``acompletion``) on the fake."""
    def kwargs(role: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"model": f"openai/fake-{role}", "messages": messages, "api_base": url,
                "api_key": API_KEY, "timeout": 60, "num_retries": 0}

    def start(state: PlanState) -> PlanState:
        return {"results": []}

    def plan_from(text: str) -> PlanState:
        return {"steps": parse_structured(text, PlanDraft).steps}

    def step_from(state: PlanState, text: str) -> PlanState:
        report = parse_structured(text, StepReport)
        description = state["steps"][len(state["results"])]
        return {"results": [*state["results"], {"description": description,
                                                "output": report.output}]}

    if asynchronous:
        async def plan(state: PlanState) -> PlanState:
            return plan_from(_text(await litellm.acompletion(**kwargs("planner", _planner(state)))))

        async def step(state: PlanState) -> PlanState:
            reply = await litellm.acompletion(**kwargs("executor", _executor(state)))
            return step_from(state, _text(reply))

        async def synthesize(state: PlanState) -> PlanState:
            reply = await litellm.acompletion(**kwargs("synthesizer", _synthesizer(state)))
            return {"answer": _text(reply)}
    else:
        def plan(state: PlanState) -> PlanState:
            return plan_from(_text(litellm.completion(**kwargs("planner", _planner(state)))))

        def step(state: PlanState) -> PlanState:
            return step_from(state, _text(litellm.completion(**kwargs("executor",
                                                                      _executor(state)))))

        def synthesize(state: PlanState) -> PlanState:
            return {"answer": _text(litellm.completion(**kwargs("synthesizer",
                                                                _synthesizer(state))))}

    graph = StateGraph(PlanState)
    graph.add_node("start", start)
    graph.add_node("plan", plan)
    graph.add_node("step", step)
    graph.add_node("synthesize", synthesize)
    graph.add_edge(START, "start")
    graph.add_edge("start", "plan")
    graph.add_edge("plan", "step")
    graph.add_conditional_edges("step", _after_step, ["step", "synthesize"])
    graph.add_edge("synthesize", END)
    return graph


class SyncRunner:
    """In process: ``invoke`` on a graph with a ``SqliteSaver`` on ``db`` or, given ``pg`` (a
    PostgreSQL connection string), a ``PostgresSaver``; either on one connection."""

    def __init__(self, url: str, db: Path | None = None, *, pg: str | None = None):
        self.conn: Any
        if pg is None:
            if db is None:
                raise ValueError("SyncRunner needs db (SQLite) or pg (PostgreSQL)")
            self.conn = sqlite3.connect(str(db), check_same_thread=False)
            saver: Any = SqliteSaver(self.conn)
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row

            # What langgraph-checkpoint-postgres requires of a connection it is handed (its
            # README and ``from_conn_string``): autocommit (setup's tables), no server-side
            # prepared statements, rows as dicts.
            self.conn = psycopg.connect(pg, autocommit=True, prepare_threshold=0,
                                        row_factory=dict_row)
            saver = PostgresSaver(self.conn)
            saver.setup()  # the checkpoint tables (idempotent: its migrations are versioned)
        self.app = build(url, asynchronous=False).compile(checkpointer=saver)

    def run(self, i: int, durability: str | None = None) -> PlanState:
        """One run; ``durability`` as ``invoke`` takes it (None: LangGraph's default,
        "async")."""
        out = self.app.invoke({"task": TASK_TEXT.format(i=i)},
                              {"configurable": {"thread_id": uuid.uuid4().hex}},
                              durability=durability)
        if not out.get("answer") or len(out["results"]) != 2:
            raise RuntimeError(f"LangGraph run {i} did not finish: {out}")
        return out

    def close(self) -> None:
        self.conn.close()


@contextlib.asynccontextmanager
async def _async_saver(db: Path | None, pg: str | None) -> AsyncIterator[Any]:
    """An ``AsyncSqliteSaver`` on ``db``, or an ``AsyncPostgresSaver`` on a pool to ``pg``."""
    if pg is None:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            yield saver
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(pg, max_size=PG_POOL_MAX, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0,
                                           "row_factory": dict_row}) as pool:
        saver = AsyncPostgresSaver(pool)  # the same connection settings as in process
        await saver.setup()
        yield saver


async def _batch(url: str, n: int, db: Path | None = None,
                 pg: str | None = None) -> dict[str, float]:
    async with _async_saver(db, pg) as saver:
        app = build(url, asynchronous=True).compile(checkpointer=saver)

        async def one(i: int) -> None:
            out = await app.ainvoke({"task": TASK_TEXT.format(i=i)},
                                    {"configurable": {"thread_id": uuid.uuid4().hex}})
            if not out.get("answer") or len(out["results"]) != 2:
                raise RuntimeError(f"LangGraph run {i} did not finish: {out}")

        await one(-1)  # warm-up: imports, the connection, LiteLLM's client cache
        started = time.monotonic()
        await one(0)
        single = time.monotonic() - started
        cpu0 = _cpu()
        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(1, n + 1)))
        makespan = time.monotonic() - started
        return {"one": single, "makespan": makespan, "cpu": _cpu() - cpu0, "rss_mb": _peak_mb()}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--n", type=int, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", type=Path, help="checkpoint to this SQLite file")
    where.add_argument("--pg", help="checkpoint to this PostgreSQL database (connection string)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_batch(args.url, args.n, db=args.db, pg=args.pg))), flush=True)


if __name__ == "__main__":
    main()
