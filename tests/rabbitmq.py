"""The machine's RabbitMQ for the remote vantage point tests: a virtual host of each test's
own (removed after), and the central side's settings to make agents' accounts there."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.servers import celery_sends_to

RABBIT_ADMIN = "http://guest:guest@127.0.0.1:15672"


@pytest.fixture
def vhost() -> Iterator[str]:
    """A RabbitMQ virtual host of this test's own, guest allowed everything there."""
    name = f"fedprobe-test-{secrets.token_hex(4)}"
    with httpx.Client(base_url=f"{RABBIT_ADMIN}/api/", timeout=10) as admin:
        try:
            admin.put(f"vhosts/{name}").raise_for_status()
        except httpx.HTTPError as exc:
            raise AssertionError(
                "RabbitMQ's management API does not answer at 127.0.0.1:15672: bin/setup "
                f"--tests enables the rabbitmq_management plugin ({exc})"
            ) from None
        everything = {"configure": ".*", "write": ".*", "read": ".*"}
        admin.put(f"permissions/{name}/guest", json=everything).raise_for_status()
        try:
            yield name
        finally:
            admin.delete(f"vhosts/{name}")


@pytest.fixture
def central(settings: Any, vhost: str) -> Iterator[str]:
    """The central side's settings for remote vantage points, its Celery app publishing to
    the test's virtual host; yields the central broker URL."""
    settings.FEDPROBE_BROKER_ADMIN_URL = RABBIT_ADMIN
    settings.FEDPROBE_AGENT_BROKER_URL = f"amqp://127.0.0.1:5672/{vhost}"
    url = f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}"
    with celery_sends_to(url):
        yield url
