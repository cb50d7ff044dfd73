"""API tokens, kept as digests (a key is shown once, when it is made, and never stored),
and the single sign-on identities users sign in with."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from webapp.accounts.roles import User, can_view, is_admin

# The key's first characters, stored to tell tokens apart in lists; the 32 hex digits after
# them (128 bits) are the secret part.
PREFIX_LENGTH = 8
# last_used is written at most this often per token: a script polling the API every second
# should not turn each of its reads into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def new_api_key() -> str:
    """A random key, 40 hex digits like the DRF keys before it (clients and log redaction
    already know that shape)."""
    return secrets.token_hex(20)


def api_key_digest(key: str) -> str:
    """SHA-256 of the key: a key has 160 random bits, so a fast hash is enough (no password
    hash, whose slowness only protects guessable secrets)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A user's API token: its key's digest and prefix, never the key."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token"
    )
    prefix = models.CharField(max_length=PREFIX_LENGTH)
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… of {self.user}"

    def mark_used(self, *, now: datetime) -> None:
        if self.last_used is not None and now - self.last_used < LAST_USED_RESOLUTION:
            return
        ApiToken.objects.filter(pk=self.pk).update(last_used=now)
        self.last_used = now


class SsoIdentity(models.Model):
    """A user's account at the single sign-on provider: its issuer and subject (`sub`)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class Team(models.Model):
    """A named group of users who share subscriptions (and, later, credentials).

    Not a role: Django's groups are the roles (roles.py). A team gives its members nothing by
    itself; what is shared with a team (a subscription now) is theirs while they are in it.
    Its managers (and admins) add and remove members and rename or delete it.
    """

    name = models.CharField(max_length=100)
    description = models.CharField(max_length=300, blank=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="TeamMembership", related_name="teams"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(Lower("name"), name="team_name_unique")]

    def __str__(self) -> str:
        return self.name

    def has_member(self, user: User | None) -> bool:
        """Whether `user` (anonymous included: no) is in the team."""
        if user is None or not user.is_authenticated:
            return False
        return self.memberships.filter(user_id=user.pk).exists()

    def managed_by(self, user: User | None) -> bool:
        """Whether `user` may change the team: one of its managers (an active account with a
        role), or an admin."""
        if is_admin(user):
            return True
        if user is None or user.pk is None or not can_view(user):
            return False
        return self.memberships.filter(user_id=user.pk, manager=True).exists()


class TeamMembership(models.Model):
    """One user in one team, and whether they manage it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    manager = models.BooleanField(
        default=False, help_text="adds and removes members, renames or deletes the team"
    )
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="team_membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}{' (manager)' if self.manager else ''}"
