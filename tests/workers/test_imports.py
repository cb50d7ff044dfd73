"""All of `workers` (the engine and the lab) stays free of Django, Celery and the web
application: it runs outside the web app, and nothing in it may reach back up."""

import subprocess
import sys
from pathlib import Path

import workers

FORBIDDEN = ("django", "celery", "kombu", "billiard", "rest_framework", "webapp")


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


def test_workers_load_neither_django_nor_celery_nor_the_web_application() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{FORBIDDEN!r})\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_workers_holds_only_the_engine_and_the_lab() -> None:
    root = Path(workers.__file__).parent
    entries = {p.name for p in root.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "engine", "lab"}
