"""Fixtures for web application tests; the engine's relay fixture is shared with them."""

from collections.abc import Iterator

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
