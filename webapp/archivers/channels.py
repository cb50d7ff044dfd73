"""How a message reaches an archiver: POSTed over HTTP (the webhooks' own client), or
published to an AMQP exchange with publisher confirms (kombu, py-amqp).

Both connect only where the egress policy lets workers connect: the host is resolved, every
address checked, and the connection made to a checked address, so DNS cannot swap the
address in between. Each step of an attempt is bounded by the archiver's `timeout_s`.
"Delivered" means the HTTP receiver answered 2xx, or the broker confirmed the message (it
took responsibility for it: routed to its queues, or dropped as unroutable by its rules).
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlsplit

from amqp.exceptions import AMQPError
from django.conf import settings
from kombu import Connection
from kombu.exceptions import KombuError

from webapp.archivers.models import Archiver
from webapp.notifications.channels import DeliveryError, webhook_post
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError

AMQP_PORTS = {"amqp": 5672, "amqps": 5671}


def archive_send(*, archiver: Archiver, body: dict[str, object], key: str) -> None:
    """Send `body` to `archiver` once; DeliveryError says why not."""
    if archiver.kind == Archiver.Kind.HTTP:
        webhook_post(
            url=archiver.url,
            headers=archiver.header_dict(),
            body=body,
            key=key,
            timeout_s=archiver.timeout_s,
        )
    else:
        amqp_publish(archiver=archiver, body=body, key=key)


def amqp_publish(*, archiver: Archiver, body: dict[str, object], key: str) -> None:
    """Publish `body` (JSON, persistent, `message_id` and header `idempotency-key` = `key`)
    and wait for the broker's confirm; DeliveryError says why not (permanent: refused by the
    egress policy)."""
    parts = urlsplit(archiver.url)
    host = parts.hostname or ""
    port = parts.port or AMQP_PORTS[parts.scheme]
    try:
        address = EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW).check_host(host, port)[0]
    except ProbeError as exc:
        raise DeliveryError(exc.message, permanent=exc.error_class == ErrorClass.EGRESS) from None
    timeout_s = archiver.timeout_s
    connection = Connection(
        hostname=str(address),
        port=port,
        userid=archiver.username or None,
        password=archiver.password or None,
        virtual_host=unquote(parts.path[1:]) or "/",
        # TLS to the checked address, verified against the URL's host name (system CAs).
        ssl={"context": {"check_hostname": True}, "server_hostname": host}
        if parts.scheme == "amqps"
        else False,
        connect_timeout=timeout_s,
        transport="pyamqp",
        transport_options={
            "confirm_publish": True,
            "read_timeout": timeout_s,
            "write_timeout": timeout_s,
        },
    )
    try:
        with connection:
            connection.ensure_connection(max_retries=0)  # once: kombu's retry sleeps 2 s
            producer = connection.Producer(auto_declare=False)
            producer.publish(
                json.dumps(body).encode(),
                exchange=archiver.exchange,
                routing_key=archiver.routing_key,
                content_type="application/json",
                content_encoding="utf-8",
                delivery_mode=2,  # persistent: a broker restart keeps it
                message_id=key,
                headers={"idempotency-key": key},
                retry=False,  # our retry policy decides, from the delivery's row
                timeout=timeout_s,  # the confirm's wait
            )
    except (AMQPError, KombuError, OSError) as exc:
        if isinstance(exc, TimeoutError) or isinstance(exc.__cause__, TimeoutError):
            raise DeliveryError("the broker did not answer in time") from None
        raise DeliveryError(f"cannot publish: {type(exc).__name__}: {exc}") from None
