"""The campaign form needs only the basic fields: the advanced ones (files per client, depth,
vector size, skip, read-ahead, streams, repetitions, deadline) are defaulted as the API
defaults them, and folded away on the page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.factories import TestFileFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Campaign

pytestmark = pytest.mark.django_db

API_DEFAULTS = {
    "files": 1,
    "depth": 64,
    "vector_size": 256,
    "skip": 3,
    "readahead": 0,
    "streams": 1,
    "repetitions": 1,
    "deadline_s": None,
}


@pytest.fixture
def operator() -> Client:
    client = Client()
    user = User.objects.create_user("olga")
    user_set_role(user=user, role="operator")
    client.force_login(user)
    return client


def basic_fields() -> dict[str, Any]:
    endpoint = TestFileFactory(size=16 * 1024 * 1024).endpoint
    return {
        "name": "first",
        "endpoints": [endpoint.pk],
        "methods": "direct",
        "patterns": "random",
        "read_sizes": "4k, 1M",
        "fractions": "0.5",
        "clients": "1, 2",
    }


def test_a_campaign_saved_with_only_the_basic_fields_has_the_api_defaults(
    operator: Client,
) -> None:
    response = operator.post("/campaigns/new/", basic_fields())
    assert response.status_code == 302, response.content.decode()
    campaign = Campaign.objects.get(name="first")
    assert {name: getattr(campaign, name) for name in API_DEFAULTS} == API_DEFAULTS


def test_a_preview_with_only_the_basic_fields_shows_the_matrix(operator: Client) -> None:
    page = operator.post("/campaigns/new/", {**basic_fields(), "preview": "1"}).content.decode()
    assert '<strong class="preview-runs">4</strong>' in page
    assert not Campaign.objects.exists()


def test_advanced_fields_left_empty_are_the_defaults(operator: Client) -> None:
    empty = dict.fromkeys(API_DEFAULTS, "")
    response = operator.post("/campaigns/new/", {**basic_fields(), **empty})
    assert response.status_code == 302, response.content.decode()
    campaign = Campaign.objects.get(name="first")
    assert {name: getattr(campaign, name) for name in API_DEFAULTS} == API_DEFAULTS


def test_the_new_form_offers_the_defaults_folded_away_and_requires_none_of_them(
    operator: Client,
) -> None:
    page = operator.get("/campaigns/new/").content.decode()
    details = re.search(r"<details class=\"advanced\">(.*?)</details>", page, re.S)
    assert details, "the advanced fields are not folded away"
    for name in ("files", "depth", "vector_size", "skip", "readahead", "streams"):
        field = re.search(rf"<input[^>]*name=\"{name}\"[^>]*>", details.group(1))
        assert field, f"{name} is not among the advanced fields"
        assert "required" not in field.group(0)
    assert re.search(r'name="depth" value="64"', details.group(1))
    assert re.search(r'name="vector_size" value="256"', details.group(1))
    assert re.search(r'name="readahead" value="0"', details.group(1))


def test_an_advanced_value_out_of_bounds_unfolds_them_with_its_error(operator: Client) -> None:
    page = operator.post("/campaigns/new/", {**basic_fields(), "depth": "0"}).content.decode()
    assert '<details class="advanced" open>' in page
    assert "depth: Ensure this value is greater than or equal to 1." in page
    assert not Campaign.objects.exists()
