"""How a message is sent: email through Django's mail framework, webhooks POSTed with httpx.

A webhook connects only where the egress policy lets workers connect (workers.engine.egress):
the host is resolved, every address checked, and the connection made to a checked address
(the engine's guarded HTTP client), so DNS cannot swap the address in between. Redirects are
never followed. Every attempt of one delivery carries the same `Idempotency-Key` header (and
`delivery_id` in the JSON body, the `Message-ID` of an email): receivers drop repeats by it.
"""

from __future__ import annotations

import json
import smtplib
from dataclasses import dataclass, field

import httpx
from django.conf import settings
from django.core.mail import EmailMessage

from webapp.core.redact import redact
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.httpclient import ClientConfig
from workers.engine.tls import ssl_context


@dataclass(frozen=True)
class Message:
    """What one delivery says: an email's subject and text, a webhook's JSON body."""

    subject: str
    text: str
    body: dict[str, object] = field(default_factory=dict)


class DeliveryError(Exception):
    """An attempt failed; `permanent` ones are not tried again. The text holds no secret."""

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(redact(reason))
        self.permanent = permanent


def email_send(*, to: str, message: Message, key: str) -> None:
    email = EmailMessage(
        subject=message.subject,
        body=message.text,
        from_email=settings.FEDPROBE_EMAIL_FROM,
        to=[to],
        headers={"Message-ID": f"<{key}@fedprobe>", "X-Fedprobe-Delivery": key},
    )
    try:
        email.send()
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        raise DeliveryError(
            f"the mail server refused {to}: {codes}", permanent=all(c >= 500 for c in codes)
        ) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"mail not sent: {type(exc).__name__}: {exc}") from None


def webhook_post(
    *,
    url: str,
    headers: dict[str, str],
    body: dict[str, object],
    key: str,
    timeout_s: float | None = None,
) -> None:
    """POST `body` to `url`, each step (connect, send, each read) within `timeout_s`
    (default FEDPROBE_NOTIFY_TIMEOUT_S); DeliveryError says why not (permanent: refused by
    the egress policy, redirected, or a 4xx other than 408 and 429). Only the answer's status
    is read, never its body: a receiver that drips a long body, each piece within the
    timeout, would otherwise hold the sender past its pass and its lease."""
    egress = EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW)
    config = ClientConfig(egress, ssl_context(None), None)
    sent = {**headers, "Content-Type": "application/json", "Idempotency-Key": key}
    try:
        with (
            config.client() as client,
            client.stream(
                "POST",
                url,
                content=json.dumps(body).encode(),
                headers=sent,
                timeout=timeout_s or settings.FEDPROBE_NOTIFY_TIMEOUT_S,
            ) as response,
        ):
            status = response.status_code
    except ProbeError as exc:
        raise DeliveryError(exc.message, permanent=exc.error_class == ErrorClass.EGRESS) from None
    except httpx.TimeoutException:
        raise DeliveryError("the receiver did not answer in time") from None
    except httpx.HTTPError as exc:
        raise DeliveryError(f"cannot reach the receiver: {type(exc).__name__}: {exc}") from None
    _judge(status)


def _judge(status: int) -> None:
    if status < 300:
        return
    if status < 400:
        raise DeliveryError(
            f"the receiver answered {status}: a redirect, not followed", permanent=True
        )
    if status in (408, 429) or status >= 500:
        raise DeliveryError(f"the receiver answered {status}")
    raise DeliveryError(f"the receiver answered {status}", permanent=True)
