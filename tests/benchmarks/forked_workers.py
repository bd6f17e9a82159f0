"""N thread-pool Celery workers forked from one parent after every import (Django, LiteLLM,
the tasks), with the imported objects frozen out of the garbage collector (``gc.freeze``) so
the children share those pages copy-on-write instead of each loading its own. A benchmark's
process model, measured by bench_worker_models.py ("2x100f"); not what ``make dev`` runs.

    FORKED_WORKERS=2 FORKED_THREADS=100 FORKED_PIDS=/tmp/pids python forked_workers.py

Each process writes its pid to ``$FORKED_PIDS.<i>``; they share the parent's process group,
so stopping the group stops them all."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    import django

    django.setup()
    import agents_app.tasks  # noqa: F401 - imported before the fork, to be shared
    import reviews_app.tasks  # noqa: F401
    from agents_app.llm.runtime import litellm
    from config.celery import app

    litellm()
    gc.collect()
    gc.freeze()
    count, index = int(os.environ.get("FORKED_WORKERS", "2")), 0
    for i in range(1, count):
        if os.fork() == 0:
            index = i
            break
    Path(f"{os.environ['FORKED_PIDS']}.{index}").write_text(str(os.getpid()))
    app.worker_main(["worker", "--pool", "threads", "--concurrency",
                     os.environ.get("FORKED_THREADS", "100"), "-n", f"forked{index}@%h",
                     "--without-mingle", "--without-gossip", "--loglevel", "INFO"])


if __name__ == "__main__":
    main()
