"""The import graph of ``agents_app``, read with ``ast`` (imports inside functions count: a lazy
import is still a cycle): the engine never imports the Celery tasks, which import the engine;
the engine enqueues by the task's name."""

import ast
from pathlib import Path

import agents_app
from agents_app.engine import scheduling
from agents_app.tasks import advance_run

ROOT = Path(agents_app.__file__).parent


def module_name(path: Path) -> str:
    parts = ["agents_app", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def graph() -> dict[str, set[str]]:
    """Each module of ``agents_app`` → the ``agents_app`` modules it imports, anywhere in it.
    Importing ``a.b.c`` runs ``a.b`` first, so it counts as importing the packages too,
    except the module's own packages (already being imported when it runs)."""
    files = {module_name(p): p for p in ROOT.rglob("*.py") if "migrations" not in p.parts}
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets.add(base)
                targets.update(f"{base}.{a.name}" for a in node.names
                               if f"{base}.{a.name}" in files)
        found: set[str] = set()
        for target in targets:
            parts = target.split(".")
            found.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
        edges[name] = {m for m in found & files.keys()
                       if m != name and not name.startswith(m + ".")}
    return edges


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_graph_sees_relative_and_lazy_imports():
    edges = graph()
    assert "agents_app.engine.scheduling" in edges["agents_app.engine.stages"]  # from . import
    assert "agents_app.models" in edges["agents_app.engine.stages"]  # from ..models import
    assert "agents_app.engine" in edges["agents_app.tasks"]
    assert "agents_app.engine" in edges["agents_app.apps"]  # imported inside ready()


def test_the_engine_never_imports_the_tasks():
    edges = graph()
    engine_modules = {m for m in edges if m == "agents_app.engine"
                      or m.startswith("agents_app.engine.")}
    assert len(engine_modules) > 5
    for module in sorted(engine_modules):
        assert "agents_app.tasks" not in reachable(edges, module), module


def test_no_module_of_the_engine_is_in_an_import_cycle():
    edges = graph()
    for module in edges:
        if module.startswith("agents_app.engine"):
            assert module not in reachable(edges, module), f"{module} imports itself back"


def test_the_engine_enqueues_the_task_by_its_registered_name():
    assert advance_run.name == scheduling.ADVANCE_RUN


def test_schedule_sends_that_name_to_the_broker(monkeypatch):
    from config.celery import app

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(
        (name, args, options)))
    scheduling.schedule(7, countdown=1.5)
    assert sent == [(advance_run.name, (7,), {"countdown": 1.5, "ignore_result": True})]
