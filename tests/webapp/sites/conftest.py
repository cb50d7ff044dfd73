"""Users of each role, logged in on their own test client."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.services import user_set_role


def login_as(username: str, role: str) -> Client:
    user = User.objects.create_user(username)
    user_set_role(user=user, role=role)
    client = Client()
    client.force_login(user)
    client.user = user  # type: ignore[attr-defined]
    return client


@pytest.fixture
def viewer(db: None) -> Client:
    return login_as("viewer", "viewer")


@pytest.fixture
def operator(db: None) -> Client:
    return login_as("operator", "operator")


@pytest.fixture
def other_operator(db: None) -> Client:
    return login_as("other-operator", "operator")


@pytest.fixture
def admin(db: None) -> Client:
    return login_as("admin", "admin")
