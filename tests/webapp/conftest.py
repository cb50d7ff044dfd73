"""Fixtures for web application tests; the engine's relay fixture is shared with them."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from tests.workers.engine.conftest import relay_to

__all__ = ["relay_to"]


@pytest.fixture(autouse=True)
def _fresh_throttle_counts() -> Iterator[None]:
    """Every test starts with no login attempts or API writes counted (the test client's
    requests all come from 127.0.0.1, so counts would carry over between tests)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def registered(lab: Any, settings: Any, tmp_path: Path) -> Iterator[Any]:
    """The lab registered, its CA merged with the host's in the test's own VAR_DIR, which
    runs verify servers against (as `lab register` arranges for the embedded mode)."""
    from webapp.demo.services import lab_register
    from webapp.sites.credentials import TOKEN_CACHE
    from webapp.sites.services import local_ca_dir

    settings.VAR_DIR = tmp_path
    lab_register(lab=lab, ca_dir=local_ca_dir())
    settings.FEDPROBE_CA_DIR = str(local_ca_dir())
    TOKEN_CACHE.forget()
    yield lab
    TOKEN_CACHE.forget()
