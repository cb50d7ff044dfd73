"""Vantage point pages: the worker command for each, create and edit for admins."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.factories import VantagePointFactory
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.django_db


def test_list_shows_the_worker_command_of_each(viewer: Client) -> None:
    VantagePointFactory(name="cern")
    VantagePointFactory(name="ral-t1")
    text = viewer.get("/vantage-points/").content.decode()
    command = "<code>celery -A webapp worker -Q vantage.{0} --concurrency 1 -n {0}@%h</code>"
    assert command.format("cern") in text
    assert command.format("ral-t1") in text
    assert "New vantage point" not in text
    assert "/edit/" not in text


def test_admin_creates_and_edits_a_vantage_point(admin: Client) -> None:
    response = admin.post(
        "/vantage-points/new/", {"name": "desy", "location": "Hamburg"}, follow=True
    )
    vantage_point = VantagePoint.objects.get(name="desy")
    assert vantage_point.location == "Hamburg"
    text = response.content.decode()
    assert "Vantage point desy was created." in text
    assert "-Q vantage.desy" in text
    assert f'href="/vantage-points/{vantage_point.pk}/edit/"' in text

    admin.post(f"/vantage-points/{vantage_point.pk}/edit/", {"name": "desy", "location": "Zeuthen"})
    vantage_point.refresh_from_db()
    assert vantage_point.location == "Zeuthen"


@pytest.mark.parametrize(
    ("name", "error"),
    [("bad name", "letters, digits"), ("", "required"), ("-dash", "letters"), ("taken", "exists")],
)
def test_bad_vantage_point_names_the_field_and_creates_nothing(
    admin: Client, name: str, error: str
) -> None:
    VantagePointFactory(name="taken")
    response = admin.post("/vantage-points/new/", {"name": name})
    assert response.status_code == 200
    text = response.content.decode()
    assert 'id="id_name_error"' in text
    assert error in text
    assert list(VantagePoint.objects.values_list("name", flat=True)) == ["taken"]


def test_viewer_cannot_edit_a_vantage_point(viewer: Client) -> None:
    vantage_point = VantagePointFactory(name="cern")
    path = f"/vantage-points/{vantage_point.pk}/edit/"
    assert viewer.get(path).status_code == 403
    assert viewer.post(path, {"name": "hijacked"}).status_code == 403
    vantage_point.refresh_from_db()
    assert vantage_point.name == "cern"
