"""The API views built on page forms publish their query parameters as the forms take them
(one converter, webapp.dashboards.schema), and the forms check repeated parameters."""

from __future__ import annotations

from datetime import date

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from rest_framework.test import APIClient

from webapp.accounts.services import user_set_role
from webapp.dashboards.forms import MAX_VALUES, ResultsForm
from workers.engine.params import MAX_READ_SIZE

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


def test_one_converter_publishes_every_page_form_compare_and_results_included(
    schema: dict,
) -> None:
    compare = _parameters(schema, "/api/v1/compare/")
    assert compare["endpoint"]["schema"] == {"type": "array", "items": {"type": "integer"}}
    assert compare["endpoint"]["explode"] is True
    assert compare["since"]["schema"] == {"type": "string", "format": "date"}
    results = _parameters(schema, "/api/v1/campaigns/{id}/results/")
    assert results["read_size"]["schema"]["items"] == {
        "type": "integer",
        "maximum": MAX_READ_SIZE,
        "minimum": 1,
    }
    assert results["endpoint"]["schema"]["items"]["format"] == "int64"
    assert results["method"]["schema"]["items"]["enum"] == ["direct", "copy", "stage"]
    assert results["vantage_point"]["schema"]["items"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 50,
    }
    assert {p["schema"]["maxItems"] for p in results.values() if "maxItems" in p["schema"]} == {
        MAX_VALUES
    }


def test_a_repeated_parameter_names_each_bad_value_and_caps_their_number() -> None:
    form = ResultsForm(QueryDict("method=direct&method=sideways&clients=0&clients=2"))
    assert not form.is_valid()
    assert list(form.errors) == ["method", "clients"]
    assert form.errors["method"][0].startswith("value 1: ")
    assert form.errors["clients"][0].startswith("value 0: ")
    many = ResultsForm(QueryDict("&".join(["clients=2"] * (MAX_VALUES + 1))))
    assert not many.is_valid()
    assert list(many.errors) == ["clients"]


def test_a_valid_results_query_is_the_filter_it_names() -> None:
    form = ResultsForm(QueryDict("method=copy&fraction=0.5&since=2026-02-01"))
    assert form.is_valid(), form.errors
    chosen = form.results_filter()
    assert (chosen.method, chosen.fraction, chosen.since) == (["copy"], [0.5], date(2026, 2, 1))
    assert chosen.clients == ()


def test_a_single_value_outside_a_query_string_is_one_value() -> None:
    form = ResultsForm({"method": "copy"})
    assert form.is_valid(), form.errors
    assert form.results_filter().method == ["copy"]
