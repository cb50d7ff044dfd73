"""A value given twice in a campaign's list counts once (API and form alike): repeats would
launch the same run several times."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.webapp.api.test_api import campaign_body, client_for
from tests.webapp.campaigns.test_campaign_pages import form_data, login
from tests.webapp.factories import VantagePointFactory
from webapp.campaigns.models import Campaign, Run

pytestmark = pytest.mark.django_db


def test_the_api_stores_each_repeated_list_value_once_and_launches_each_run_once(
    django_capture_on_commit_callbacks: Any,
) -> None:
    operator = client_for("operator")
    vantage_point = VantagePointFactory(name="far")
    body = campaign_body(
        methods=["direct", "direct", "copy", "direct"],
        patterns=["random", "random"],
        read_sizes=[4096, 4096, 1048576],
        fractions=[0.1, 0.1, 0.10],
        clients=[1, 1, 1],
        vantage_points=[vantage_point.pk, vantage_point.pk],
    )
    body["endpoints"] = body["endpoints"] * 3
    answer = operator.post("/api/v1/campaigns/", body, format="json")
    assert answer.status_code == 201, answer.json()
    created = answer.json()
    assert created["methods"] == ["direct", "copy"]
    assert created["patterns"] == ["random"]
    assert created["read_sizes"] == [4096, 1048576]
    assert created["fractions"] == [0.1]
    assert created["clients"] == [1]
    assert created["matrix_size"] == 2 * 2
    with django_capture_on_commit_callbacks(execute=False):
        launched = operator.post(f"/api/v1/campaigns/{created['id']}/launch/")
    assert launched.status_code == 201
    runs = Run.objects.filter(campaign_id=created["id"])
    assert runs.count() == 4
    keys = set(runs.values_list("method", "read_size", "clients", "endpoint", "vantage_point"))
    assert len(keys) == 4


def test_an_api_edit_with_repeats_stores_each_value_once() -> None:
    operator = client_for("operator")
    created = operator.post("/api/v1/campaigns/", campaign_body(), format="json").json()
    answer = operator.patch(
        f"/api/v1/campaigns/{created['id']}/", {"clients": [4, 4, 1, 4]}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    assert Campaign.objects.get(pk=created["id"]).clients == [4, 1]


def test_the_form_stores_each_repeated_value_once(client: Client) -> None:
    login(client, "operator")
    data = form_data(
        methods="direct, direct",
        read_sizes="4k, 4096, 1M, 4k",
        fractions="0.5, 0.50",
        clients="1, 1, 1",
    )
    response = client.post("/campaigns/new/", data)
    assert response.status_code == 302
    campaign = Campaign.objects.get()
    assert campaign.methods == ["direct"]
    assert campaign.read_sizes == [4096, 1024 * 1024]
    assert campaign.fractions == [0.5]
    assert campaign.clients == [1]
    assert campaign.matrix_size() == 2
