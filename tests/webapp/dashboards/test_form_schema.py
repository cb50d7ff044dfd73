"""The API views built on page forms publish their query parameters as the forms take them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema() -> dict:
    user = User.objects.create_user("schema-reader")
    user_set_role(user=user, role="viewer")
    client = APIClient()
    client.force_authenticate(user)
    return client.get("/api/schema/", {"format": "json"}).json()


def _parameters(schema: dict, path: str) -> dict[str, dict]:
    return {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}


@pytest.mark.parametrize(
    ("path", "floats"),
    [
        ("/api/v1/matrix/", ["good", "bad", "fraction"]),
        ("/api/v1/alerts/", ["drop_pct", "rise_pct", "fraction"]),
    ],
)
def test_float_parameters_are_numbers_and_none_is_required(
    schema: dict, path: str, floats: list[str]
) -> None:
    parameters = _parameters(schema, path)
    assert {name: parameters[name]["schema"]["type"] for name in floats} == dict.fromkeys(
        floats, "number"
    )
    assert [name for name, p in parameters.items() if p.get("required")] == []
