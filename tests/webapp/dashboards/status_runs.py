"""Runs with chosen times and figures, for the matrix, home and alerts tests."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from tests.webapp.factories import CampaignFactory, TestFileFactory
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from webapp.watch.evaluate import watch_evaluate

P = {
    "operation": "read",
    "method": "direct",
    "pattern": "random",
    "read_size": 65536,
    "fraction": 0.1,
    "clients": 2,
    "address_family": "any",
}
Q = {
    **P,
    "method": "copy",
    "pattern": "sequential",
    "read_size": 1 << 20,
    "fraction": 1.0,
    "clients": 1,
}


def night(days_ago: int, hour: int = 2) -> datetime:
    """A time on the night `days_ago` days before today (UTC), never in the future: tonight's
    `hour` before it has come is a minute ago (or midnight), still today's night. A run made
    in the future stayed newer than any pass, and the tests failed before 02:00 UTC."""
    now = timezone.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    at = now.replace(hour=hour, minute=0, second=0, microsecond=0) - timedelta(days=days_ago)
    return min(at, max(midnight, now - timedelta(minutes=1)))


class RunMaker:
    """add(endpoint, vantage_point, status, at, **figures) -> Run, in one campaign."""

    def __init__(self) -> None:
        self.campaign: Campaign | None = None
        self.files: dict[int, TestFile] = {}

    def endpoint(self, name: str, *, site: Any = None, protocol: str = "root") -> Endpoint:
        extra = {"endpoint__site": site} if site is not None else {}
        test_file = TestFileFactory(
            endpoint__name=name,
            endpoint__protocol=protocol,
            endpoint__base_url=_url(protocol),
            **extra,
        )
        self.files[test_file.endpoint_id] = test_file
        return test_file.endpoint

    def add(
        self,
        endpoint: Endpoint,
        vantage_point: VantagePoint,
        status: str,
        at: datetime,
        params: dict[str, Any] = P,
        **figures: Any,
    ) -> Run:
        if self.campaign is None:
            self.campaign = CampaignFactory(endpoints=[endpoint])
        run = Run.objects.create(
            campaign=self.campaign,
            endpoint=endpoint,
            test_file=self.files[endpoint.pk],
            vantage_point=vantage_point,
            status=status,
            errors=figures.pop("errors", []),
            **params,
            **figures,
        )
        # An ended run ended a minute after it began: the watch rolls it up by its end.
        finished = at + timedelta(minutes=1) if status in Run.Status.ENDED else None
        Run.objects.filter(pk=run.pk).update(created_at=at, finished_at=finished)
        run.created_at, run.finished_at = at, finished
        return run


def watch_pass(now: datetime | None = None) -> None:
    """The watch's pass, late enough that every run made above has settled: the alerts read
    what it stores."""
    watch_evaluate(now=(now or timezone.now()) + timedelta(hours=1))


def _url(protocol: str) -> str:
    return {"root": "root://127.0.0.1:1094/", "https": "https://127.0.0.1:8443/"}.get(
        protocol, f"{protocol}://127.0.0.1:1/"
    )
