"""Where finished runs are pushed (archivers), and each run's push to each (deliveries).

An `Archiver` is an HTTP URL each run's JSON is POSTed to, or an AMQP exchange it is
published to, as perfSONAR's archivers are. The finished runs are its outbox: the pump
(webapp.archivers.outbox) makes one `ArchiveDelivery` per (run, archiver), unique, and
claims each with a conditional update and a lease before it sends it, as the notifications'
outbox does. Its secrets (HTTP headers, AMQP user and password) are stored encrypted and are
write-only.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.db import models

from webapp.accounts.crypto import EncryptedTextField
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Site


def default_retry_policy() -> list[dict[str, int]]:
    """Three tries a minute apart, three ten minutes apart, then hourly six times: a receiver
    down for a restart loses nothing, one down for a day is given up (ttl_s) and shown."""
    return [
        {"attempts": 3, "wait_s": 60},
        {"attempts": 3, "wait_s": 600},
        {"attempts": 6, "wait_s": 3600},
    ]


class Archiver(models.Model):
    """A place each finished run's JSON is pushed to: an HTTP URL or an AMQP exchange."""

    class Kind(models.TextChoices):
        HTTP = "http"  # POST the JSON to `url`
        AMQP = "amqp"  # publish it to `exchange` with `routing_key` on the broker at `url`

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=4, choices=Kind.choices)
    enabled = models.BooleanField(default=True, help_text="unticked: paused, runs wait for it")
    url = models.CharField(
        max_length=2000,
        help_text="http: the https:// (or http://) URL POSTed to; amqp: the broker, "
        "amqp://host:port/vhost or amqps://...; without user or password (their own fields)",
    )
    headers = EncryptedTextField(
        blank=True,
        help_text="http: extra headers (Authorization...), a JSON object; write-only",
    )
    exchange = models.CharField(
        max_length=255, blank=True, help_text="amqp: the exchange (empty: the default one)"
    )
    routing_key = models.CharField(max_length=255, blank=True, help_text="amqp: routing key")
    username = EncryptedTextField(blank=True, help_text="amqp: the broker's user; write-only")
    password = EncryptedTextField(blank=True, help_text="amqp: the user's password; write-only")
    campaign = models.ForeignKey(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="only this campaign's runs (none: every campaign's)",
    )
    site = models.ForeignKey(
        Site,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="only runs against this site's endpoints (none: every site's)",
    )
    retry_policy = models.JSONField(
        default=default_retry_policy,
        help_text='after a failed attempt: [{"attempts": N, "wait_s": S}, ...], N more tries '
        "S seconds apart, step after step; then given up",
    )
    ttl_s = models.PositiveIntegerField(
        default=24 * 3600, help_text="a run not delivered this long after it was queued is given up"
    )
    timeout_s = models.FloatField(default=10.0, help_text="each attempt's time limit (1-60 s)")
    archive_from = models.DateTimeField(
        help_text="runs finished from then on are pushed (made: when it was made; "
        "`manage.py archivers backfill` moves it back)"
    )
    scanned_to = models.DateTimeField(
        null=True, blank=True, help_text="the pump's watermark: runs finished before it are made"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def header_dict(self) -> dict[str, str]:
        return dict(json.loads(self.headers)) if self.headers else {}

    def runs(self) -> models.Q:
        """The finished runs it takes: ended (not cancelled), of its campaign and site if
        set, finished since archive_from."""
        chosen = models.Q(status__in=Run.Status.ENDED, finished_at__gte=self.archive_from)
        if self.campaign_id is not None:
            chosen &= models.Q(campaign_id=self.campaign_id)
        if self.site_id is not None:
            chosen &= models.Q(endpoint__site_id=self.site_id)
        return chosen

    def retry_wait(self, failed_attempts: int) -> timedelta | None:
        """How long to wait after the `failed_attempts`-th failed attempt (None: give up)."""
        left = failed_attempts
        for step in self.retry_policy:
            if left <= step["attempts"]:
                return timedelta(seconds=step["wait_s"])
            left -= step["attempts"]
        return None


class ArchiveDelivery(models.Model):
    """One finished run's JSON to one archiver."""

    class Status(models.TextChoices):
        PENDING = "pending"  # to send at next_attempt_at
        SENDING = "sending"  # claimed by a worker until lease_until
        DELIVERED = "delivered"  # the receiver answered 2xx, or the broker confirmed
        FAILED = "failed"  # given up: refused, or the retry policy (or ttl) ran out

    archiver = models.ForeignKey(Archiver, on_delete=models.CASCADE, related_name="deliveries")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, help_text="the last attempt's failure, redacted")
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "archiver"], name="archive_delivery_once"),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="archive_delivery_due_idx"),
            # The backlog reads each archiver's undelivered rows and its last delivery, never
            # the history of delivered ones.
            models.Index(fields=["archiver", "status"], name="archive_delivery_state_idx"),
            models.Index(fields=["archiver", "delivered_at"], name="archive_delivery_last_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} to archiver {self.archiver_id}: {self.status}"

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt, and for the run and archiver even if the row is made
        again: receivers drop repeats by it."""
        return f"fedprobe-run-{self.run_id}-archiver-{self.archiver_id}"
