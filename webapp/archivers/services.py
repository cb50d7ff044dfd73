"""Archivers: checked and saved the same way by the API, the admin and the command.

The secrets (`headers`, `username`, `password`) are write-only: left out (None) of a change,
they are kept; but a new `url` without them is refused, so a saved secret never goes to an
address it was not given for. The address must be one workers may connect to (the egress
policy, after resolving the host): checked here, and again at each connection.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from webapp.archivers.channels import AMQP_PORTS
from webapp.archivers.models import Archiver
from webapp.core.redact import redact
from webapp.notifications.services import webhook_url_refusal
from workers.engine.egress import EgressPolicy, literal_refusal
from workers.engine.errors import ProbeError

Kind = Archiver.Kind
FIELDS = (
    "name",
    "kind",
    "enabled",
    "url",
    "headers",
    "exchange",
    "routing_key",
    "username",
    "password",
    "campaign",
    "site",
    "retry_policy",
    "ttl_s",
    "timeout_s",
)
SECRETS = ("headers", "username", "password")
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")
TIMEOUT_S = (1.0, 60.0)
TTL_S = (60, 30 * 24 * 3600)
MAX_STEPS, MAX_STEP_ATTEMPTS, MAX_WAIT_S = 10, 100, 24 * 3600


def archiver_save(
    *, values: dict[str, Any], now: datetime, archiver: Archiver | None = None
) -> Archiver:
    """Create (or change) an archiver; ValidationError names each bad field and nothing is
    saved then. A new one archives the runs finished from `now` on; `headers` is a dict."""
    row = archiver_prepare(values=values, now=now, archiver=archiver)
    with transaction.atomic():
        row.save()
    return row


def archiver_prepare(
    *, values: dict[str, Any], now: datetime, archiver: Archiver | None = None
) -> Archiver:
    """`archiver` (or a new one) with `values` set and checked, not saved; ValidationError
    names each bad field."""
    row = archiver or Archiver(archive_from=now)
    moved = _moved_without_secrets(row, values, new=archiver is None)
    for name, value in values.items():
        if name not in FIELDS:
            raise ValidationError({name: "not a field of an archiver"})
        if name in SECRETS and value is None and archiver is not None:
            continue  # write-only: left out means kept
        stored = _headers_text(value) if name == "headers" else value
        setattr(row, name, "" if stored is None and name in SECRETS else stored)
    errors = archiver_errors(row)
    if moved and not errors:
        errors[moved] = (
            "give it again with a new url: the saved one goes only to the url it was given for"
        )
    if errors:
        raise ValidationError(errors)
    return row


def _headers_text(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value) if value else ""
    return value  # the check below names what is wrong with it


def _moved_without_secrets(row: Archiver, values: dict[str, Any], *, new: bool) -> str:
    """The saved secret field a change of `url` leaves out ("": none)."""
    url = values.get("url")
    if new or url is None or url == row.url:
        return ""
    kind = values.get("kind", row.kind)
    for name in ("headers",) if kind == Kind.HTTP else ("username", "password"):
        if getattr(row, name) and values.get(name) is None:
            return name
    return ""


def archiver_errors(row: Archiver) -> dict[str, str]:
    """What is wrong with `row`, by field; fields of the other kind are emptied."""
    errors: dict[str, str] = {}
    if not _SLUG.fullmatch(row.name or ""):
        errors["name"] = "letters, digits, - and _ (at most 100)"
    elif Archiver.objects.filter(name=row.name).exclude(pk=row.pk).exists():
        errors["name"] = f"an archiver named {row.name} exists"
    if row.kind == Kind.HTTP:
        row.exchange = row.routing_key = row.username = row.password = ""
        errors.update(_http_errors(row))
    elif row.kind == Kind.AMQP:
        row.headers = ""
        errors.update(_amqp_errors(row))
    else:
        errors["kind"] = f"one of {', '.join(Kind.values)}"
    errors.update(_policy_errors(row))
    return errors


def _http_errors(row: Archiver) -> dict[str, str]:
    errors: dict[str, str] = {}
    refusal = webhook_url_refusal(row.url or "") or _secret_in_url(row.url)
    if refusal:
        errors["url"] = refusal
    try:
        headers = json.loads(row.headers) if row.headers else {}
    except (TypeError, ValueError):
        return {**errors, "headers": 'a JSON object: {"Authorization": "Bearer ..."}'}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        errors["headers"] = 'a JSON object of texts: {"Authorization": "Bearer ..."}'
    elif not all(_HEADER_NAME.fullmatch(name) for name in headers):
        errors["headers"] = "not a header name: " + ", ".join(
            repr(n) for n in headers if not _HEADER_NAME.fullmatch(n)
        )
    elif any(c in value for value in headers.values() for c in "\r\n"):
        errors["headers"] = "each value one line"
    return errors


def _amqp_errors(row: Archiver) -> dict[str, str]:
    errors: dict[str, str] = {}
    refusal = amqp_url_refusal(row.url or "")
    if refusal:
        errors["url"] = refusal
    if not row.exchange and not row.routing_key:
        errors["routing_key"] = "the queue's name, for the default exchange (or give an exchange)"
    for name in ("username", "password"):
        if any(c in (getattr(row, name) or "") for c in "\r\n"):
            errors[name] = "one line"
    return errors


def amqp_url_refusal(url: str) -> str | None:
    """Why a server may not publish to the broker at `url` (None: it may): not amqp(s)://,
    a user or password in it, or an address the egress policy refuses."""
    try:
        parts = urlsplit(url.strip())
        hostname, port = parts.hostname, parts.port
    except ValueError:
        return "not a valid URL (or port)"
    if parts.scheme not in AMQP_PORTS or not hostname:
        return "an amqp:// or amqps:// URL: amqp://host:5672/vhost"
    if "@" in parts.netloc:
        return "must not carry a user or password: give them in username and password"
    literal = literal_refusal(hostname)
    if literal:
        return f"refused by the egress policy: {literal}"
    try:
        EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW).check_host(
            hostname, port or AMQP_PORTS[parts.scheme]
        )
    except ProbeError as exc:
        return exc.message
    return None


def _secret_in_url(url: str) -> str | None:
    """URLs are shown (admin, API, logs): a token in one goes in a header instead."""
    if "@" in urlsplit(url).netloc or redact(url) != url:
        return "must not carry a secret (user:password@, ?token=...): put it in headers"
    return None


def _policy_errors(row: Archiver) -> dict[str, str]:
    errors: dict[str, str] = {}
    if not _is_number(row.timeout_s) or not TIMEOUT_S[0] <= row.timeout_s <= TIMEOUT_S[1]:
        errors["timeout_s"] = f"seconds, {TIMEOUT_S[0]:g} to {TIMEOUT_S[1]:g}"
    if not isinstance(row.ttl_s, int) or not TTL_S[0] <= row.ttl_s <= TTL_S[1]:
        errors["ttl_s"] = f"seconds, {TTL_S[0]} to {TTL_S[1]} (30 days)"
    refusal = retry_policy_refusal(row.retry_policy)
    if refusal:
        errors["retry_policy"] = refusal
    return errors


def retry_policy_refusal(policy: Any) -> str | None:
    shape = '[{"attempts": 3, "wait_s": 60}, {"attempts": 6, "wait_s": 3600}]'
    if not isinstance(policy, list) or len(policy) > MAX_STEPS:
        return f"a list of at most {MAX_STEPS} steps: {shape}"
    for step in policy:
        if not isinstance(step, dict) or set(step) != {"attempts", "wait_s"}:
            return f"each step is {{attempts, wait_s}}: {shape}"
        attempts, wait_s = step["attempts"], step["wait_s"]
        if not _is_int(attempts) or not 1 <= attempts <= MAX_STEP_ATTEMPTS:
            return f"attempts: 1 to {MAX_STEP_ATTEMPTS}"
        if not _is_int(wait_s) or not 1 <= wait_s <= MAX_WAIT_S:
            return f"wait_s: 1 to {MAX_WAIT_S} seconds"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def archiver_backfill(*, archiver: Archiver, since: datetime) -> Archiver:
    """Push also the runs finished since `since` (not yet pushed to it): the next passes make
    their deliveries, oldest first, a batch at a time."""
    Archiver.objects.filter(pk=archiver.pk).update(archive_from=since, scanned_to=None)
    archiver.refresh_from_db()
    return archiver
