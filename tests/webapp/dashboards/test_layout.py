"""The dashboards keep one shape: every page's reads in selectors/<page>.py, its query form in
forms.py, its page in views.py and its API view in api.py; nothing below them imports them,
and no module imports another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WEBAPP = ROOT / "webapp"
PAGES = ("home", "results", "compare", "matrix", "alerts", "site_summary", "thresholds")
# The apps below the dashboards (core < accounts < sites < campaigns < watch < dashboards < api).
BELOW = ("core", "accounts", "sites", "campaigns")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from webapp... import name` in the file."""
    tree = ast.parse(path.read_text())
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("webapp")
        for alias in node.names
    ]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_has_its_selectors_module(page: str) -> None:
    assert (WEBAPP / "dashboards" / "selectors" / f"{page}.py").is_file()


@pytest.mark.parametrize("app", BELOW)
def test_the_apps_below_import_nothing_of_the_dashboards(app: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in (WEBAPP / app).rglob("*.py")
        for module, _ in _imports(path)
        if module.startswith("webapp.dashboards")
    ]
    assert found == []


def test_no_private_name_is_imported_across_modules() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {module}.{name}"
        for path in WEBAPP.rglob("*.py")
        for module, name in _imports(path)
        if name.startswith("_")
    ]
    assert found == []
