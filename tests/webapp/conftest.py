"""Fixtures for web application tests; the engine's relay fixture is shared with them."""

from tests.workers.engine.conftest import relay_to

__all__ = ["relay_to"]
