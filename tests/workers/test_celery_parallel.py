"""Exclusive, not serial: a vantage point measures runs of different endpoints side by side, up
to its max_parallel_runs, and never two runs of one endpoint at once; a run that must wait
stays queued (not lost, not failed) and is taken later. Claims are decided on PostgreSQL under
a lock on the vantage point's row, so they hold across processes: racing threads with their
own connections, and real Celery workers measuring the lab."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from tests.workers.test_celery import lab_endpoint, wait_for_final
from webapp.campaigns.models import Run
from webapp.campaigns.services import RunMustWait, campaign_launch, run_claim, runs_resend_stale
from webapp.sites.models import Endpoint, VantagePoint


def queued_run(vantage_point: VantagePoint, endpoint: Endpoint) -> Run:
    test_file = TestFileFactory(endpoint=endpoint)
    return RunFactory(vantage_point=vantage_point, endpoint=endpoint, test_file=test_file)


@pytest.mark.django_db
def test_a_second_run_of_one_endpoint_waits_queued_while_another_endpoint_s_runs() -> None:
    point = VantagePointFactory(name="pair", max_parallel_runs=2)
    first, second = EndpointFactory(), EndpointFactory()
    running = queued_run(point, first)
    assert run_claim(run_id=running.pk, worker="w1") is not None
    same = queued_run(point, first)
    with pytest.raises(RunMustWait, match=f"measuring {first.name}"):
        run_claim(run_id=same.pk, worker="w2")
    same.refresh_from_db()
    assert (same.status, same.started_at, same.worker) == (Run.Status.QUEUED, None, "")
    assert not same.attempts.exists()
    other = queued_run(point, second)
    assert run_claim(run_id=other.pk, worker="w2") is not None  # side by side


@pytest.mark.django_db
def test_a_vantage_point_runs_no_more_than_its_limit_at_once() -> None:
    point = VantagePointFactory(name="pair", max_parallel_runs=2)
    runs = [queued_run(point, EndpointFactory()) for _ in range(3)]
    for run in runs[:2]:
        assert run_claim(run_id=run.pk, worker="w") is not None
    with pytest.raises(RunMustWait, match="measuring 2 runs"):
        run_claim(run_id=runs[2].pk, worker="w")
    Run.objects.filter(pk=runs[0].pk).update(status=Run.Status.SUCCEEDED)
    assert run_claim(run_id=runs[2].pk, worker="w") is not None
    # Another vantage point's runs do not count.
    elsewhere = queued_run(VantagePointFactory(name="elsewhere"), runs[0].endpoint)
    assert run_claim(run_id=elsewhere.pk, worker="w") is not None


@pytest.mark.django_db
def test_a_run_waiting_its_turn_is_not_taken_for_lost_by_the_resend_pass(settings: Any) -> None:
    settings.FEDPROBE_RESEND_AFTER_S = 300
    point = VantagePointFactory()
    endpoint = EndpointFactory()
    running = queued_run(point, endpoint)
    waiting = queued_run(point, endpoint)
    old = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk__in=[running.pk, waiting.pk]).update(created_at=old)
    assert run_claim(run_id=running.pk, worker="w") is not None
    # The long run ended just now, after starting an hour ago; the waiting run was refused
    # a moment before: its last send is that refusal, not its creation.
    Run.objects.filter(pk=running.pk).update(started_at=old)
    with pytest.raises(RunMustWait):
        run_claim(run_id=waiting.pk, worker="w")
    Run.objects.filter(pk=running.pk).update(status=Run.Status.SUCCEEDED)
    outcome = runs_resend_stale(now=timezone.now())
    assert (outcome.resent, outcome.failed) == ([], [])
    waiting.refresh_from_db()
    assert (waiting.status, waiting.resent_count) == (Run.Status.QUEUED, 0)
    assert waiting.resent_at is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit", [1, 3])
def test_claims_racing_from_many_connections_keep_the_endpoint_exclusive_and_the_limit(
    limit: int,
) -> None:
    point = VantagePointFactory(name="racing", max_parallel_runs=limit)
    endpoints = [EndpointFactory() for _ in range(4)]
    runs = [queued_run(point, endpoint) for endpoint in endpoints for _ in range(3)]
    start = threading.Barrier(len(runs))
    outcomes: dict[int, str] = {}

    def claim(run: Run) -> None:
        try:
            start.wait()
            outcomes[run.pk] = "running" if run_claim(run_id=run.pk, worker="w") else "none"
        except RunMustWait:
            outcomes[run.pk] = "waits"
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    running = list(Run.objects.filter(status=Run.Status.RUNNING))
    assert len(running) == limit == list(outcomes.values()).count("running")
    assert len({run.endpoint_id for run in running}) == limit  # never two of one endpoint
    assert list(outcomes.values()).count("waits") == len(runs) - limit


def overlapping(a: Run, b: Run) -> bool:
    assert a.started_at and a.finished_at and b.started_at and b.finished_at
    return a.started_at < b.finished_at and b.started_at < a.finished_at


def most_at_once(runs: list[Run]) -> int:
    edges: list[tuple[datetime, int]] = []
    for run in runs:
        assert run.started_at and run.finished_at
        edges += [(run.started_at, 1), (run.finished_at, -1)]
    level = peak = 0
    for _, step in sorted(edges):  # an end before a start at the same instant
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.lab
def test_real_workers_measure_different_endpoints_side_by_side_never_one_twice(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    # Concurrency above the limit: the claims, not the pool size, hold it to 2.
    worker = start_celery_worker("parallel", concurrency=3)
    endpoints = [lab_endpoint(lab, name) for name in ("near-root", "near-http", "local-root")]
    point = VantagePoint.objects.create(name="parallel", max_parallel_runs=2)
    # 4 KiB reads of an eighth of 16 MiB, 2 ms away: about a second a run.
    campaign = CampaignFactory(
        endpoints=endpoints,
        vantage_points=[point],
        read_sizes=[4096],
        fractions=[0.125],
        clients=[1],
        repetitions=3,
    )
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    runs = wait_for_final(launched, worker, timeout_s=240)
    assert {r.status for r in runs} == {Run.Status.SUCCEEDED}, [r.errors for r in runs]
    for endpoint in endpoints:
        own = [run for run in runs if run.endpoint_id == endpoint.pk]
        assert not any(overlapping(a, b) for a, b in itertools.combinations(own, 2))
    assert any(
        overlapping(a, b)
        for a, b in itertools.combinations(runs, 2)
        if a.endpoint_id != b.endpoint_id
    )
    assert most_at_once(runs) == 2
    assert " waits: " in worker.log()  # some runs were refused their turn, then measured
