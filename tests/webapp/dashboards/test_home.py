"""The home page's "Running and queued": a large launch does not hide the running run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.dashboards.status_runs import RunMaker, night
from tests.webapp.factories import VantagePointFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Run
from webapp.dashboards.selectors.home import QUEUED_ROWS

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


@pytest.fixture
def viewer(client: Client) -> Client:
    user = User.objects.create_user("viewer")
    user_set_role(user=user, role="viewer")
    client.force_login(user)
    return client


def test_home_lists_the_running_run_before_a_96_run_queue(
    viewer: Client, django_assert_max_num_queries: Any
) -> None:
    make = RunMaker()
    endpoint = make.endpoint("busy")
    local = VantagePointFactory(name="local")
    start = night(0)
    running = make.add(endpoint, local, S.RUNNING, start)
    queued = [
        make.add(endpoint, local, S.QUEUED, start + timedelta(seconds=i + 1)) for i in range(95)
    ]
    # 14, 2 for the Regressions (open, tester faults), 4 for the tester-fault runs and the
    # expiring credentials, 4 for the watch's pass the alerts come from and their regressions.
    with django_assert_max_num_queries(24):
        html = viewer.get("/").content.decode()
    ids = [int(part.split('"', 1)[0]) for part in html.split('data-run-id="')[1:]]
    assert ids[0] == running.pk
    # The queue follows in the order workers take it: the oldest first.
    assert ids[1:] == [run.pk for run in queued[:QUEUED_ROWS]]
    assert f"{95 - QUEUED_ROWS} more queued" in html
    assert "1 running, 95 queued" in html
    assert '<span class="badge">96</span>' in html


def test_home_says_when_nothing_runs(viewer: Client) -> None:
    html = viewer.get("/").content.decode()
    assert "Nothing is running." in html and "more queued" not in html
