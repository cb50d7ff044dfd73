"""Honest estimates on the lab: the duration estimated before a launch of the lab's example
campaign (`manage.py bootstrap`'s "direct vs copy at the near site") is within a factor of 2
of how long the launch took, measured by a real worker. The history is a smaller first try of
the same campaign (one client, random reads), as a new user would run it, so most runs of the
full campaign are estimated from throughput and overhead, not from identical runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import CampaignFactory
from tests.workers.test_celery import lab_endpoint, wait_for_final
from webapp.campaigns.estimates import campaign_duration
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.demo.management.commands.bootstrap import EXAMPLE
from webapp.sites.models import VantagePoint

# bootstrap's example campaign (webapp/demo/management/commands/bootstrap.py).
EXAMPLE_FIELDS: dict[str, Any] = {
    "methods": ["direct", "copy"],
    "patterns": ["sequential", "random"],
    "read_sizes": [4096, 1024 * 1024],
    "fractions": [0.01],
    "clients": [1, 4],
}


def launch_took_s(campaign: Campaign, worker: WorkerProcess) -> float:
    runs = wait_for_final(
        campaign_launch(campaign=campaign, trigger=Run.Trigger.API), worker, timeout_s=600
    )
    assert {run.status for run in runs} == {Run.Status.SUCCEEDED}, [r.errors for r in runs]
    ends = [run.finished_at for run in runs if run.finished_at]
    return (max(ends) - min(run.created_at for run in runs)).total_seconds()


@pytest.mark.lab
def test_the_estimate_before_a_launch_of_the_lab_example_is_within_a_factor_of_2(
    lab: Any, celery_worker: WorkerProcess
) -> None:
    endpoints = [lab_endpoint(lab, name) for name in ("near-root", "near-http")]
    local = VantagePoint.local()
    first_try = CampaignFactory(
        endpoints=endpoints,
        vantage_points=[local],
        **{**EXAMPLE_FIELDS, "patterns": ["random"], "clients": [1]},
    )
    launch_took_s(first_try, celery_worker)
    example = CampaignFactory(
        name=EXAMPLE, endpoints=endpoints, vantage_points=[local], **EXAMPLE_FIELDS
    )
    estimate = campaign_duration(campaign=example)
    assert estimate.unknown == 0 and estimate.seconds is not None, estimate
    took_s = launch_took_s(example, celery_worker)
    assert took_s / 2 <= estimate.seconds <= took_s * 2, (estimate, took_s)
