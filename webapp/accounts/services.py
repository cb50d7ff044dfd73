"""Workflows on users: roles and API tokens."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, Group
from django.db import IntegrityError, transaction

from webapp.accounts.models import PREFIX_LENGTH, ApiToken, api_key_digest, new_api_key
from webapp.accounts.roles import ROLES


def user_set_role(*, user: AbstractUser, role: str) -> None:
    """Give `user` exactly one role: the groups of the other roles are left."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    with transaction.atomic():
        user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=role))
        user.groups.add(Group.objects.get(name=role))


class ApiTokenExists(Exception):
    """The user has a token already: its key cannot be shown again, only replaced."""


def api_token_exists(*, user: AbstractUser) -> bool:
    return ApiToken.objects.filter(user=user).exists()


def api_token_revoke(*, user: AbstractUser) -> None:
    ApiToken.objects.filter(user=user).delete()


def api_token_create(*, user: AbstractUser) -> str:
    """A token for `user`, who has none: its key, which only its digest is kept of."""
    key = new_api_key()
    try:
        with transaction.atomic():
            ApiToken.objects.create(
                user=user, prefix=key[:PREFIX_LENGTH], digest=api_key_digest(key)
            )
    except IntegrityError as exists:
        raise ApiTokenExists(f"{user.get_username()} has an API token already") from exists
    return key


def api_token_rotate(*, user: AbstractUser) -> str:
    """A new token for `user`; the old one stops working."""
    with transaction.atomic():
        api_token_revoke(user=user)
        return api_token_create(user=user)
