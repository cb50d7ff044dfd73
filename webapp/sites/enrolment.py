"""Remote vantage points: enrolment and revocation of their agents (docs/vantage-points.md).

An admin asks for a one-time enrolment token (`manage.py vantage enrol NAME`); on the remote
host, `python -m workers.agent enrol URL TOKEN` makes the agent's key pair there and sends
the public key with the token. The server keeps the key (run credentials are sealed to it),
gives the agent a token of its own to claim and report runs with, and an account on the
broker that reaches only its queue. Revoking ends all three. Only digests of tokens are
stored: a database dump enrols nobody and impersonates no agent.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from webapp.sites import broker_accounts
from webapp.sites.broker_accounts import BrokerAccount
from webapp.sites.models import VantagePoint
from workers.agent.sealing import SealingError, fingerprint
from workers.engine.errors import InvalidParams

# How long an enrolment token may be used, once.
ENROLMENT_TOKEN_LIFETIME = timedelta(hours=24)


class EnrolmentRefused(Exception):
    """The enrolment token is unknown, used, expired or revoked (one message for all: it
    tells a guesser nothing)."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def vantage_enrolment_start(*, name: str, now: datetime) -> tuple[VantagePoint, str]:
    """A one-time enrolment token for vantage point `name` (made if missing), valid for
    ENROLMENT_TOKEN_LIFETIME; a new one replaces the previous. Refused for the built-in local
    vantage point, which the deployment's own workers measure from."""
    if name == VantagePoint.LOCAL:
        raise InvalidParams(
            "name", f"{name!r} is the deployment's own vantage point: its workers need no enrolment"
        )
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        vantage_point = VantagePoint.objects.select_for_update().filter(name=name).first()
        if vantage_point is None:
            vantage_point = VantagePoint(name=name)
            try:
                vantage_point.full_clean()
            except Exception as exc:
                raise InvalidParams("name", _first_message(exc)) from None
        vantage_point.enrolment_token_digest = digest(token)
        vantage_point.enrolment_expires_at = now + ENROLMENT_TOKEN_LIFETIME
        vantage_point.save()
    return vantage_point, token


@dataclass(frozen=True)
class Enrolment:
    """What the agent is told once, at enrolment: never stored in the clear here."""

    vantage_point: VantagePoint
    agent_token: str
    broker: BrokerAccount


def vantage_enrol(*, token: str, public_key: str, now: datetime) -> Enrolment:
    """Enrol the agent holding `token` with its `public_key`: EnrolmentRefused for a token that
    does not (or no longer) enrol, InvalidParams naming `public_key` for a bad key. The
    vantage point's previous key, agent token and broker account (a re-enrolment) end here."""
    try:
        fingerprint(public_key)
    except SealingError as exc:
        raise InvalidParams("public_key", str(exc)) from None
    with transaction.atomic():
        vantage_point = (
            VantagePoint.objects.select_for_update()
            .filter(enrolment_token_digest=digest(token))
            .exclude(enrolment_token_digest="")
            .first()
        )
        expires = vantage_point.enrolment_expires_at if vantage_point else None
        if vantage_point is None or expires is None or expires <= now:
            raise EnrolmentRefused("the enrolment token is unknown, used or expired")
        if vantage_point.broker_user:
            # A re-enrolment: the old account goes first, and RabbitMQ closes its
            # connections (a new password alone would leave them open).
            broker_accounts.delete(vantage_point.broker_user)
        broker = broker_accounts.create(vantage_point.name, vantage_point.queue)
        agent_token = secrets.token_urlsafe(32)
        vantage_point.public_key = public_key
        vantage_point.enrolled_at = now
        vantage_point.revoked_at = None
        vantage_point.enrolment_token_digest = ""
        vantage_point.enrolment_expires_at = None
        vantage_point.agent_token_digest = digest(agent_token)
        vantage_point.broker_user = broker.user
        vantage_point.save()
    return Enrolment(vantage_point, agent_token, broker)


def vantage_for_agent(token: str) -> VantagePoint | None:
    """The enrolled, unrevoked vantage point whose agent token this is, or None."""
    if not token:
        return None
    # Found by the token's digest through an index: what a lookup's timing could tell is
    # about the digest, which says nothing usable about a token (as API tokens).
    found = VantagePoint.objects.filter(agent_token_digest=digest(token)).first()
    if found is None or found.revoked_at is not None:
        return None
    return found


def vantage_revoke(*, vantage_point: VantagePoint, now: datetime) -> None:
    """Revoke an enrolled vantage point: its agent token and any pending enrolment token end
    at once, and nothing is sealed to its key any more; then its broker account is deleted
    (BrokerAccountsUnavailable if the broker does not answer: the account is kept on record
    and deleted when revoking again). Its runs are ended by
    campaigns.agents.vantage_point_revoke, which calls this."""
    vantage_point.revoked_at = vantage_point.revoked_at or now
    vantage_point.agent_token_digest = ""
    vantage_point.enrolment_token_digest = ""
    vantage_point.enrolment_expires_at = None
    vantage_point.save()
    if vantage_point.broker_user:
        broker_accounts.delete(vantage_point.broker_user)
        vantage_point.broker_user = ""
        vantage_point.save(update_fields=["broker_user"])


def _first_message(exc: Exception) -> str:
    messages = getattr(exc, "message_dict", None)
    if messages:
        return "; ".join(f"{field}: {' '.join(texts)}" for field, texts in messages.items())
    return str(exc)
