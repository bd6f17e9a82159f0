# Quorum — the two commands: `make dev` and `make test` (and `make test-fast` while editing).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell sha1sum requirements.lock | cut -c1-12)
DEV_ENV := DEBUG=$${DEBUG:-true}

.PHONY: dev test test-fast install lint lock bench faults clean

$(STAMP): requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11+ is required"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

dev: install
	$(DEV_ENV) exec $(PY) manage.py devstack --prepare

# The whole suite, in two tiers: the unit tier (no servers) spread over every core, then the
# integration and browser tier (real Redis, Celery worker, Daphne, Chromium) in one process,
# one shared stack for all the browser tests.
UNIT := -m "not browser and not integration"
LIVE := -m "browser or integration"

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest $(UNIT) -n 4
	$(PY) -m pytest $(LIVE)

# The edit-test loop: the unit tier over every core, less its few `slow` tests (fresh Django
# processes, the every-route-and-field input sweep: `make test` runs them), keeping the test
# databases (var/test-quorum.sqlite3_gw*) between runs; `make clean` drops them.
test-fast: install
	$(PY) -m pytest -m "not browser and not integration and not slow" -n 4 --reuse-db -q

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Regenerate the locks after changing dependencies in pyproject.toml or requirements-bench.in
# (uv, pinned, in a scratch virtualenv of its own under var/; existing pins are kept).
UV := var/uv/bin/uv
$(UV):
	$(PYTHON) -m venv var/uv
	var/uv/bin/pip install --quiet --disable-pip-version-check uv==0.13.9

lock: $(UV)
	$(UV) pip compile pyproject.toml --extra test --python-version 3.11 --generate-hashes -o requirements.lock
	$(UV) pip compile requirements-bench.in -c requirements.lock --python-version 3.11 --generate-hashes -o requirements-bench.lock

# The benchmark-only packages (LangGraph for bench_vs_langgraph, gevent for bench_wait_on_loop),
# on top of the app's.
BENCH_STAMP := $(VENV)/.bench-$(shell sha1sum requirements-bench.lock | cut -c1-12)
$(BENCH_STAMP): $(STAMP) requirements-bench.lock
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-bench.lock
	rm -f $(VENV)/.bench-*
	touch $(BENCH_STAMP)

# Each script is also one command on its own; docs/BENCHMARKS.md has the figures.
BENCHMARKS := bench_review bench_concurrency bench_gate_resume bench_streaming \
              bench_engine_overhead bench_history bench_watchers bench_change \
              bench_parallel_patterns bench_webhook bench_review_quality bench_worker_models \
              bench_litellm_call bench_vs_langgraph bench_memory_design bench_forks \
              bench_charts bench_calibration bench_experiments bench_inbox bench_inbox_fanout

bench: install $(BENCH_STAMP)
	@for b in $(BENCHMARKS); do echo "== $$b"; $(PY) tests/benchmarks/$$b.py || exit 1; done
	@echo "== PostgreSQL, max_connections = 100 (issue 37)"
	$(PY) tests/benchmarks/bench_vs_langgraph.py --database postgres --no-others
	$(PY) tests/benchmarks/bench_run_memory.py --database postgres
	$(PY) tests/benchmarks/bench_pool_handoff.py
	$(PY) tests/benchmarks/bench_pg_waits.py
	$(PY) tests/benchmarks/bench_pg_commit.py
	$(PY) tests/benchmarks/bench_commit_ahead.py --database postgres
	$(PY) tests/benchmarks/bench_commit_ahead.py
	$(PY) tests/benchmarks/bench_wait_on_loop.py --live
	@echo "== PostgreSQL, the history at 1,000,000 runs (issue 37; 6–15 min to build, ~15 GB on disk while it runs)"
	$(PY) tests/benchmarks/bench_history_pg.py

# Fault injection, each script with a pass/fail summary; docs/RELIABILITY.md has the results.
FAULTS := sigkill redis_restart model_faults db_locked pg_restart deadline_restart two_hosts

faults: install
	@for f in $(FAULTS); do echo "== $$f"; $(PY) tests/faults/$$f.py || exit 1; done

clean:
	rm -rf var/test-quorum.sqlite3* .pytest_cache .mypy_cache
