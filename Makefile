# Quorum — the two commands: `make dev` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell sha1sum requirements.lock | cut -c1-12)
DEV_ENV := DEBUG=$${DEBUG:-true}

.PHONY: dev test install lint lock bench clean

$(STAMP): requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11+ is required"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

dev: install
	$(DEV_ENV) $(PY) manage.py migrate --noinput
	$(DEV_ENV) $(PY) manage.py ensure_first_user
	$(DEV_ENV) exec $(PY) manage.py devstack

test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .

# Regenerate the lock after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra test --python-version 3.11 --generate-hashes -o requirements.lock

bench: install
	$(PY) tests/benchmarks/bench_concurrency.py
	$(PY) tests/benchmarks/bench_review.py
	$(PY) tests/benchmarks/bench_change.py
	$(PY) tests/benchmarks/bench_parallel_patterns.py

clean:
	rm -rf var/test-quorum.sqlite3* .pytest_cache
