"""A small federation's state for the /metrics tests and the dashboards' queries: two sites
(an XRootD and an HTTPS endpoint), two vantage points, three nights of runs rolled up by the
watch's own pass, an open regression, a worker's heartbeat, a queued run, a notification
and an archive delivery waiting to be sent: something for every family /metrics exports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.utils import timezone

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RegressionFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
    user,
)
from tests.webapp.watch.nights import Series, run
from webapp.archivers.models import ArchiveDelivery, Archiver
from webapp.campaigns.models import Run
from webapp.notifications.models import Delivery, Subscription
from webapp.sites.models import WorkerHeartbeat
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression

PARAMS = "direct:random:65536:0.1:2"  # tests.webapp.watch.nights.run's parameter set


@dataclass(frozen=True)
class Federation:
    now: datetime
    series: list[Series]  # ALPHA's root from local, from ral; BETA's https from local, from ral
    regression: Regression


def federation_state() -> Federation:
    """The state, the watch's pass run on it this morning (the nights are the three before)."""
    today = datetime.now(UTC).date()
    now = datetime.combine(today, time(0, 30), tzinfo=UTC)
    points = [VantagePointFactory(name="local"), VantagePointFactory(name="ral")]
    alpha = EndpointFactory(name="alpha-root", protocol="root", site=SiteFactory(name="ALPHA"))
    beta = EndpointFactory(
        name="beta-https",
        protocol="https",
        base_url="https://beta.example.org:8443/data",
        site=SiteFactory(name="BETA"),
    )
    series = []
    for endpoint in (alpha, beta):
        test_file = TestFileFactory(endpoint=endpoint)
        campaign = CampaignFactory(endpoints=[endpoint], vantage_points=points)
        series += [Series(endpoint, point, campaign, test_file) for point in points]
    for days_ago in (3, 2, 1):
        night = today - timedelta(days=days_ago)
        for n, of in enumerate(series):
            if n == 3 and days_ago == 1:  # BETA from ral failed last night: a failing series
                run(of, night, status="failed", error="connect")
                continue
            speed = 100.0 * (n + 1)
            figures = {"open_s": 0.2 * (n + 1), "ttfb_s": 0.3, "latency_p99_us": 20_000.0}
            run(of, night, throughput_mbps=speed, wall_s=2.0, **figures)
    watch_evaluate(now=now)
    regression = RegressionFactory(
        endpoint=beta,
        vantage_point=points[1],
        site=beta.site,
        severity=Regression.Severity.CRITICAL,
        key=f"metrics-test:{beta.pk}:{points[1].pk}:availability",
        metric="availability",
    )
    # ral's worker: the session's real worker may be heartbeating as local's meanwhile.
    WorkerHeartbeat.objects.create(
        hostname="vantage-ral@host", queue="vantage.ral", pid=4242, version="test",
        started_at=timezone.now() - timedelta(hours=1), last_seen=timezone.now(),
    )  # fmt: skip
    run(series[0], today, status=Run.Status.QUEUED)
    subscription = Subscription.objects.create(
        owner=user("ops"), channel="email", email="ops@example.org"
    )
    Delivery.objects.create(
        subscription=subscription,
        digest_day=today - timedelta(days=1),
        created_at=now - timedelta(minutes=10),
        next_attempt_at=now,
    )
    archiver = Archiver.objects.create(
        name="perfsonar", kind="http", url="http://archive.example.org/", archive_from=now
    )
    ArchiveDelivery.objects.create(
        archiver=archiver,
        run=Run.objects.filter(status=Run.Status.SUCCEEDED).first(),
        created_at=now - timedelta(minutes=5),
        next_attempt_at=now,
    )
    return Federation(now, series, regression)
