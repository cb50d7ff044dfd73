"""Runs of given nights for the watch's tests: created at 02:00 UTC of their night and ended
a minute later, with the figures and errors a test names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from webapp.watch.evaluate import watch_evaluate

NIGHT_ONE = date(2026, 10, 1)


@dataclass(frozen=True)
class Series:
    """One endpoint seen from one vantage point with the factories' parameter set."""

    endpoint: Endpoint
    vantage_point: VantagePoint
    campaign: Campaign
    test_file: TestFile


def series(
    *, endpoint: Endpoint | None = None, vantage_point: str = "local", **endpoint_fields: Any
) -> Series:
    endpoint = endpoint or EndpointFactory(**endpoint_fields)
    point = VantagePointFactory(name=vantage_point)
    test_file = TestFile.objects.filter(endpoint=endpoint).first() or TestFileFactory(
        endpoint=endpoint
    )
    campaign = CampaignFactory(endpoints=[endpoint], vantage_points=[point])
    return Series(endpoint, point, campaign, test_file)


def night(n: int) -> date:
    """The n-th night after NIGHT_ONE."""
    return NIGHT_ONE + timedelta(days=n)


def measure(of: Series, n: int, *outcomes: str) -> None:
    """Runs of night `n`: "ok", or a failed run's error class ("timeout" times out)."""
    for outcome in outcomes:
        if outcome == "ok":
            run(of, night(n), throughput_mbps=10.0)
        elif outcome == "timeout":
            run(of, night(n), status="timeout")
        else:
            run(of, night(n), status="failed", error=outcome)


def watch(n: int) -> None:
    """The watch's pass on the morning after night `n`."""
    watch_evaluate(now=at(night(n), 6))


def at(night: date, hour: int = 2) -> datetime:
    return datetime.combine(night, time(hour), tzinfo=UTC)


def run(
    of: Series,
    night: date,
    *,
    status: str = "succeeded",
    error: str = "",
    finished: datetime | None = None,
    created: datetime | None = None,
    **fields: Any,
) -> Run:
    """One run of `of` on `night` (throughput and the like from `fields`), ended unless it is
    queued; created at 02:00 that night unless `created` says when."""
    made = Run.objects.create(
        campaign=of.campaign,
        endpoint=of.endpoint,
        test_file=of.test_file,
        vantage_point=of.vantage_point,
        method="direct",
        pattern="random",
        read_size=65536,
        fraction=0.1,
        clients=2,
        status=status,
        errors=[{"class": error, "message": error, "client": 0}] if error else [],
        **fields,
    )
    created = created or at(night) + timedelta(seconds=made.pk % 600)
    if status == Run.Status.QUEUED:
        Run.objects.filter(pk=made.pk).update(created_at=created)
    else:
        Run.objects.filter(pk=made.pk).update(
            created_at=created,
            started_at=created,
            finished_at=finished or created + timedelta(minutes=1),
        )
    made.refresh_from_db()
    return made
