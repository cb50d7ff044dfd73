"""Each remote vantage point's own account on the broker: RabbitMQ, through its management
HTTP API (the rabbitmq_management plugin), so that the agent of vantage point V can consume
`vantage.V` and nothing else (docs/vantage-points.md#the-broker).

Settings: FEDPROBE_BROKER_ADMIN_URL, the management API with an administrator's credentials
(`http://admin:PASSWORD@broker.example.org:15672/`), and FEDPROBE_AGENT_BROKER_URL, the
address agents connect to (`amqps://broker.example.org:5671/fedprobe`; its path is the
virtual host), to which each agent's user and password are added.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx
from django.conf import settings

# The management API answers at once or not at all.
ADMIN_TIMEOUT_S = 10.0
USER_PREFIX = "fedprobe-vp-"


class BrokerAccountsUnavailable(Exception):
    """No broker to make accounts on, or it refused: the message says which, never a secret."""


@dataclass(frozen=True)
class BrokerAccount:
    """What an agent connects to the broker with. `url` holds its password: it is handed to
    the agent once, at enrolment, and never logged or stored here."""

    user: str
    url: str = ""

    def __repr__(self) -> str:
        return f"BrokerAccount(user={self.user!r})"  # never the password


def configured() -> str | None:
    """Why accounts cannot be made, or None when they can."""
    if not settings.FEDPROBE_BROKER_ADMIN_URL or not settings.FEDPROBE_AGENT_BROKER_URL:
        return (
            "remote vantage points need a RabbitMQ broker that fedprobe can make accounts on: "
            "set FEDPROBE_BROKER_ADMIN_URL (its management API) and FEDPROBE_AGENT_BROKER_URL "
            "(the address agents connect to); see docs/vantage-points.md"
        )
    return None


def permission_pattern(queue: str) -> str:
    """The queue (and the exchange of the same name Celery declares for it), exactly."""
    return f"^{re.escape(queue)}$"


def create(name: str, queue: str) -> BrokerAccount:
    """A new user for vantage point `name` with a new password, allowed to declare, bind and
    consume `queue` only (the same user again: its password and permissions are replaced)."""
    why = configured()
    if why is not None:
        raise BrokerAccountsUnavailable(why)
    user = f"{USER_PREFIX}{name}"
    password = secrets.token_urlsafe(32)
    pattern = permission_pattern(queue)
    with _admin() as (client, vhost):
        _call(client, "PUT", f"users/{quote(user, safe='')}", {"password": password, "tags": ""})
        _call(
            client,
            "PUT",
            f"permissions/{quote(vhost, safe='')}/{quote(user, safe='')}",
            {"configure": pattern, "write": pattern, "read": pattern},
        )
    return BrokerAccount(user, _agent_url(user, password))


def delete(user: str) -> None:
    """Delete an agent's user: RabbitMQ closes its connections at once. Gone already is fine."""
    if configured() is not None or not user.startswith(USER_PREFIX):
        return
    with _admin() as (client, _):
        _call(client, "DELETE", f"users/{quote(user, safe='')}", None, missing_ok=True)


@contextmanager
def _admin() -> Iterator[tuple[httpx.Client, str]]:
    """An httpx client on the management API, and the agents' virtual host."""
    parts = urlsplit(settings.FEDPROBE_BROKER_ADMIN_URL)
    auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/api/", "", ""))
    with httpx.Client(base_url=base, auth=auth, timeout=ADMIN_TIMEOUT_S) as client:
        yield client, _vhost(settings.FEDPROBE_AGENT_BROKER_URL)


def _call(
    client: httpx.Client, method: str, path: str, body: object, *, missing_ok: bool = False
) -> None:
    try:
        response = client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise BrokerAccountsUnavailable(
            f"the broker's management API did not answer: {type(exc).__name__}"
        ) from None
    if response.status_code == 404 and missing_ok:
        return
    if response.status_code >= 300:
        raise BrokerAccountsUnavailable(
            f"the broker's management API answered {response.status_code} to {method} "
            f"{path.split('/', 1)[0]}: {response.text[:200]}"
        )


def _vhost(url: str) -> str:
    """The virtual host of an amqp(s) URL: its path without the first slash ('/' if none)."""
    path = urlsplit(url).path
    return unquote(path[1:]) if len(path) > 1 else "/"


def _agent_url(user: str, password: str) -> str:
    parts = urlsplit(settings.FEDPROBE_AGENT_BROKER_URL)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
