"""All of `workers` stays free of Django and the web application, and the engine and the lab of
Celery too: they run outside the web app, and nothing in them may reach back up. A remote
vantage point's agent (`workers.agent`) is a Celery worker, with the engine, and nothing of
Django: it runs where Django is not configured."""

import subprocess
import sys
from pathlib import Path

import workers

FORBIDDEN = ("django", "celery", "kombu", "billiard", "rest_framework", "webapp")
# kombu imports django.utils.functional where Django is installed (to serialize its lazy
# strings): the agent may not load what configures Django or reaches a database.
AGENT_FORBIDDEN = ("django.conf", "django.db", "django.apps", "rest_framework", "webapp")


def _modules() -> list[str]:
    """Every module of the package, by its dotted name (`__main__`s run their command when
    imported: they are left out, and only import `cli`, which is in)."""
    root = Path(workers.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_of_workers_is_found() -> None:
    modules = _modules()
    assert {"workers", "workers.engine.driver", "workers.lab.cli"} <= set(modules)
    assert "workers.engine.backends.xroot" in modules
    assert len(modules) > 40


def _loaded(modules: list[str], forbidden: tuple[str, ...]) -> str:
    """What importing `modules` in a fresh Python loads of `forbidden`'s packages."""
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') "
        f"for f in {forbidden!r}))\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_engine_and_the_lab_load_neither_django_nor_celery_nor_the_web_application() -> None:
    modules = [m for m in _modules() if not m.startswith("workers.agent")]
    assert _loaded(modules, FORBIDDEN) == "[]"


def test_the_agent_loads_nothing_of_django_nor_the_web_application() -> None:
    modules = [m for m in _modules() if m.startswith("workers.agent")]
    assert "workers.agent.worker" in modules
    assert _loaded(modules, AGENT_FORBIDDEN) == "[]"


def test_workers_holds_only_the_engine_the_lab_and_the_agent() -> None:
    root = Path(workers.__file__).parent
    entries = {p.name for p in root.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "engine", "lab", "agent"}
