"""Workflows on users: roles and API tokens."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from webapp.accounts.roles import ROLES


def user_set_role(*, user: AbstractUser, role: str) -> None:
    """Give `user` exactly one role: the groups of the other roles are left."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    with transaction.atomic():
        user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=role))
        user.groups.add(Group.objects.get(name=role))


def api_token_exists(*, user: AbstractUser) -> bool:
    return Token.objects.filter(user=user).exists()


def api_token_revoke(*, user: AbstractUser) -> None:
    Token.objects.filter(user=user).delete()


def api_token_get_or_create(*, user: AbstractUser) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return str(token.key)


def api_token_rotate(*, user: AbstractUser) -> str:
    """A new token for `user`; the old one stops working."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return str(Token.objects.create(user=user).key)
