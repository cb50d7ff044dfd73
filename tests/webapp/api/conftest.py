"""Fixtures of the API fuzzer's three parts (test_api_fuzz.py, test_api_fuzz_second_part.py,
test_api_fuzz_third_part.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from tests.servers import celery_sends_to
from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RegressionFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.accounts.services import team_create
from webapp.accounts.throttles import WriteRateThrottle
from webapp.archivers.models import Archiver
from webapp.campaigns.models import Run
from webapp.campaigns.traces import trace_create
from webapp.notifications.models import Subscription
from webapp.sites.models import Downtime

# A recorded job (the engine's test data): the seeded trace.
TRACE = Path(__file__).parents[2] / "workers" / "engine" / "data" / "recorded-job.csv"


@pytest.fixture
def seeded(transactional_db: None) -> tuple[User, dict[str, int]]:
    """An operator and one row of each kind it may edit: the ids per collection."""
    operator = User.objects.create_user("fuzzer", password="x")
    # A transactional test before this one may have flushed the groups migrations made.
    operator.groups.add(Group.objects.get_or_create(name="operator")[0])
    site = SiteFactory(owner=operator)
    endpoint = EndpointFactory(site=site, owner=operator, base_url="root://fuzz.invalid:1094/")
    test_file = TestFileFactory(endpoint=endpoint, adler32="0000abcd")
    vantage_point = VantagePointFactory(name="fuzz")  # no worker consumes its queue
    # The campaign holds the trace (a delete is refused until the campaign's is done).
    trace = trace_create(name="fuzz", text=TRACE.read_text(), owner=operator)
    campaign = CampaignFactory(
        owner=operator, endpoints=[endpoint], vantage_points=[vantage_point], trace=trace
    )
    run = RunFactory(
        campaign=campaign, test_file=test_file, vantage_point=vantage_point,
        status=Run.Status.SUCCEEDED, throughput_mbps=12.0,
    )  # fmt: skip
    regression = RegressionFactory(endpoint=endpoint, vantage_point=vantage_point)
    downtime = Downtime.objects.create(
        site=site, start=run.created_at, end=run.created_at + timedelta(hours=2),
        severity="outage", scheduled=True,
    )  # fmt: skip
    ids = {
        "downtimes": downtime.pk,
        "sites": site.pk,
        "endpoints": endpoint.pk,
        "vantage-points": vantage_point.pk,
        "campaigns": campaign.pk,
        "traces": trace.pk,
        "runs": run.pk,
        "subscriptions": Subscription.objects.create(
            owner=operator, channel="email", email="fuzzer@example.org"
        ).pk,
        "regressions": regression.pk,
        "teams": team_create(name="fuzz-team", by=operator).pk,
        # Admins' only: the operator's requests answer 403 (its schema checked).
        "archivers": Archiver.objects.create(
            name="fuzz", kind="http", url="http://127.0.0.1:9/", archive_from=run.created_at
        ).pk,
    }
    return operator, ids


@pytest.fixture
def unthrottled(monkeypatch: pytest.MonkeyPatch) -> None:
    """API writes unthrottled: the fuzzer writes far more than 120 a minute."""
    rates = {**WriteRateThrottle.THROTTLE_RATES, "writes": "100000/min"}
    monkeypatch.setattr(WriteRateThrottle, "THROTTLE_RATES", rates)


@pytest.fixture
def no_measurements() -> Iterator[None]:
    with celery_sends_to("memory://"):
        yield
