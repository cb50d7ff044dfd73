"""The apps import downward only (accounts < core < sites < campaigns < advice < watch <
notifications < archivers < dashboards < api < demo) and the engine and the lab import nothing
of Django, Celery or the web application: import-linter's contracts in pyproject.toml, checked
here so that bin/test catches a break."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the packages and pyproject.toml under `root`, found there first."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_apps_import_downward_only_and_the_engine_nothing_of_ours() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for package in ("webapp", "workers"):
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    models = tmp_path / "webapp" / "sites" / "models.py"
    models.write_text(models.read_text() + "\nfrom webapp.campaigns.models import Run  # noqa\n")

    result = lint_imports(tmp_path)

    assert result.returncode == 1
    assert "webapp.sites is not allowed to import webapp.campaigns" in result.stdout
    assert "webapp.sites.models -> webapp.campaigns.models" in result.stdout
