"""Who is told about regressions, and each message that tells them.

A `Subscription` is a user's or a team's; it says where (an email address, or a webhook),
about what (everything, a site, an endpoint, a vantage point) and how often (each state
change, or a daily digest). A team's email goes to each member's own address, a team's
webhook once. The watch's `RegressionEvent`s are the outbox: the fan-out makes one `Delivery`
per event and destination (a subscription, or a subscription and one member: unique), and
marks the event done with an `EventFanOut` in the same transaction; a digest subscription
gets one `Delivery` per day and destination instead (unique too). A delivery is claimed with a
conditional update before it is sent, so no two workers send it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.accounts.crypto import EncryptedTextField
from webapp.accounts.models import Team
from webapp.accounts.roles import User, is_admin
from webapp.watch.models import Regression, RegressionEvent


class Subscription(models.Model):
    """A user's or a team's request to be told about regressions of a target, by email or
    webhook."""

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Format(models.TextChoices):
        GENERIC = "generic"  # our JSON body
        SLACK = "slack"  # {"text": ...}: Slack's and Mattermost's incoming webhooks

    class Target(models.TextChoices):
        ALL = "all"
        SITE = "site"
        ENDPOINT = "endpoint"
        VANTAGE_POINT = "vantage_point"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
        help_text="the user it is for; none: a team's",
    )
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
        help_text="the team it is for: email to each member, a webhook once",
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.GENERIC)
    target = models.CharField(max_length=14, choices=Target.choices, default=Target.ALL)
    target_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="the site, endpoint or vantage point; none for all"
    )
    digest = models.BooleanField(
        default=False, help_text="one message a day instead of one per state change"
    )
    email = models.EmailField(
        blank=True,
        help_text="email channel: where to (the owner's); a team's: none (each member's)",
    )
    url = EncryptedTextField(
        blank=True,
        help_text="webhook channel: where to; write-only (Slack's and Mattermost's URLs carry "
        "their token in the path)",
    )
    url_shown = models.CharField(
        max_length=300, blank=True, help_text="the webhook URL's scheme and host, as shown"
    )
    secret_header = models.CharField(
        max_length=100, blank=True, help_text="the header the secret goes in (Authorization...)"
    )
    secret = EncryptedTextField(
        blank=True, help_text="the header's value: write-only, never shown again"
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["active", "target"], name="subscription_target_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(owner__isnull=True) ^ models.Q(team__isnull=True),
                name="subscription_owner_xor_team",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} to {self.destination} about {self.target_label}"

    @property
    def destination(self) -> str:
        """Where messages go, as it may be shown: the email address (a team's: its members'),
        or the webhook's scheme and host (its path and query may carry the token)."""
        if self.channel == self.Channel.WEBHOOK:
            return self.url_shown
        return self.email or ("each member's address" if self.team_id else "")

    @property
    def subscriber(self) -> str:
        """Whose it is, as shown: the user's name, or "team NAME"."""
        if self.team is not None:
            return f"team {self.team.name}"
        return self.owner.get_username() if self.owner is not None else ""

    def managed_by(self, user: User | None) -> bool:
        """Whether `user` may see, change or delete it: its owner, a member of its team, or an
        admin."""
        if is_admin(user):
            return True
        if user is None or not user.is_authenticated:
            return False
        if self.team is not None:
            return self.team.has_member(user)
        return bool(self.owner_id == user.pk)

    @property
    def target_label(self) -> str:
        return "everything" if self.target == self.Target.ALL else f"{self.target} {self.target_id}"

    def matches(self, regression: Regression) -> bool:
        """Whether a change of `regression` is this subscription's business."""
        match self.target:
            case self.Target.ALL:
                return True
            case self.Target.SITE:
                site_ids = {regression.site_id, getattr(regression.endpoint, "site_id", None)}
                return self.target_id in site_ids
            case self.Target.ENDPOINT:
                return regression.endpoint_id == self.target_id
            case _:
                return regression.vantage_point_id == self.target_id

    def regressions(self) -> models.Q:
        """The filter of the regressions `matches` accepts."""
        match self.target:
            case self.Target.ALL:
                return models.Q()
            case self.Target.SITE:
                return models.Q(site_id=self.target_id) | models.Q(endpoint__site_id=self.target_id)
            case self.Target.ENDPOINT:
                return models.Q(endpoint_id=self.target_id)
            case _:
                return models.Q(vantage_point_id=self.target_id)


class EventFanOut(models.Model):
    """One regression event already turned into its deliveries (written with them)."""

    event = models.OneToOneField(RegressionEvent, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    deliveries = models.PositiveIntegerField(help_text="how many it made (0: nobody to tell)")
    skipped = models.CharField(
        max_length=40, blank=True, help_text="why nobody was told (silenced, a group member...)"
    )

    def __str__(self) -> str:
        return f"event {self.event_id}: {self.deliveries} deliveries"


class Delivery(models.Model):
    """One message to one subscription: about one regression event, or one day's digest."""

    class Status(models.TextChoices):
        PENDING = "pending"  # to send at next_attempt_at
        SENDING = "sending"  # claimed by a worker until lease_until
        SENT = "sent"
        FAILED = "failed"  # given up: the receiver refused it, or was down too long
        DROPPED = "dropped"  # not sent: its recipient left the team (or lost their role)

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(
        RegressionEvent, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    digest_day = models.DateField(
        null=True, blank=True, help_text="a digest: the UTC day it sums up"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="a team's email: the member it goes to (at their address when sent)",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, help_text="the last attempt's failure, redacted")
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One per event (or day) and destination: a subscription's address or webhook,
            # or one member of a team's email subscription. Partial, as NULLs are distinct.
            models.UniqueConstraint(
                fields=["event", "subscription"],
                condition=models.Q(event__isnull=False, recipient__isnull=True),
                name="delivery_once_per_event",
            ),
            models.UniqueConstraint(
                fields=["event", "subscription", "recipient"],
                condition=models.Q(event__isnull=False, recipient__isnull=False),
                name="delivery_once_per_event_and_member",
            ),
            models.UniqueConstraint(
                fields=["subscription", "digest_day"],
                condition=models.Q(digest_day__isnull=False, recipient__isnull=True),
                name="delivery_one_digest_a_day",
            ),
            models.UniqueConstraint(
                fields=["subscription", "digest_day", "recipient"],
                condition=models.Q(digest_day__isnull=False, recipient__isnull=False),
                name="delivery_one_digest_a_day_per_member",
            ),
            models.CheckConstraint(
                condition=models.Q(event__isnull=True) ^ models.Q(digest_day__isnull=True),
                name="delivery_event_xor_digest",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="delivery_due_idx"),
        ]

    def __str__(self) -> str:
        about = f"event {self.event_id}" if self.event_id else f"digest {self.digest_day}"
        return f"delivery {self.pk} ({about}): {self.status}"

    @property
    def destination(self) -> str:
        """Where it goes, as it may be shown: the member's address, or the subscription's."""
        if self.recipient is not None:
            return self.recipient.email
        return self.subscription.destination

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt of this delivery: receivers drop repeats by it."""
        return f"fedprobe-delivery-{self.pk}"
