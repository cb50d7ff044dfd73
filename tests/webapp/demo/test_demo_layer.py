"""The demo app sits at the top of the layers: it may import any app, no app imports it."""

import ast
from pathlib import Path

import webapp

WEBAPP = Path(webapp.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_module_of_the_web_application_imports_the_demo_app() -> None:
    importers = [
        str(path.relative_to(WEBAPP.parent))
        for path in sorted(WEBAPP.rglob("*.py"))
        if WEBAPP / "demo" not in path.parents
        and any(name.split(".")[:2] == ["webapp", "demo"] for name in _imported_modules(path))
    ]
    assert importers == []


def test_the_demo_app_holds_the_lab_and_history_commands() -> None:
    from django.core.management import get_commands

    commands = get_commands()
    assert {commands[name] for name in ("lab", "bootstrap", "history")} == {"webapp.demo"}
    assert commands["probe"] == "webapp.core"
