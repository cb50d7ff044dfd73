"""API pages: deep pages, read keys first, hold the same rows in the same order as slices."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from tests.webapp.factories import RunFactory, TestFileFactory, VantagePointFactory
from webapp.accounts.services import api_token_create
from webapp.campaigns.selectors import run_list
from webapp.core import pagination

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> APIClient:
    user = User.objects.create_user("pager")
    user.groups.add(Group.objects.get(name="viewer"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


@pytest.fixture
def runs() -> list[int]:
    test_file = TestFileFactory()
    vantage_point = VantagePointFactory()
    for _ in range(23):
        RunFactory(test_file=test_file, vantage_point=vantage_point)
    return list(run_list().values_list("pk", flat=True))


@pytest.mark.parametrize("keys_first_from", [0, 10**9], ids=["keys-first", "plain"])
def test_every_page_holds_the_slice_of_the_ordered_runs(
    viewer: APIClient, runs: list[int], keys_first_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pagination, "KEYS_FIRST_FROM", keys_first_from)
    for offset in range(0, 30, 7):
        body = viewer.get(f"/api/v1/runs/?limit=7&offset={offset}").json()
        assert body["count"] == 23
        assert [run["id"] for run in body["results"]] == runs[offset : offset + 7]


def test_keys_first_page_with_a_filter_and_past_the_end(
    viewer: APIClient, runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pagination, "KEYS_FIRST_FROM", 0)
    RunFactory(status="failed")
    failed = viewer.get("/api/v1/runs/?status=failed&offset=0").json()
    assert failed["count"] == 1 and failed["results"][0]["status"] == "failed"
    assert viewer.get("/api/v1/runs/?offset=500").json()["results"] == []
