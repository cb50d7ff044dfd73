"""Honest estimates on the lab: the duration estimated before a launch of the lab's example
campaign (`manage.py bootstrap`'s "read directly or copy first") is within a factor of 2 of
how long the launch took, measured by a real worker. The history is a smaller first try of
the same campaign (one fraction), as a new user would run it, so most runs of the full
campaign are estimated from throughput and overhead, not from identical runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import CampaignFactory
from tests.workers.test_celery import lab_endpoint, wait_for_final
from webapp.campaigns.estimates import campaign_duration
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.demo.examples import EXAMPLES
from webapp.sites.models import VantagePoint

# bootstrap's direct-vs-copy example campaign (webapp/demo/examples.py).
EXAMPLE = EXAMPLES[0]
EXAMPLE_FIELDS: dict[str, Any] = dict(EXAMPLE.fields)


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
    endpoints = [lab_endpoint(lab, name) for name in EXAMPLE.endpoints]
    files = [endpoint.files.get(size=EXAMPLE.file_size) for endpoint in endpoints]
    local = VantagePoint.local()
    first_try = CampaignFactory(
        endpoints=endpoints, vantage_points=[local], **{**EXAMPLE_FIELDS, "fractions": [0.1]}
    )
    first_try.test_files.set(files)
    launch_took_s(first_try, celery_worker)
    example = CampaignFactory(
        name=EXAMPLE.name, endpoints=endpoints, vantage_points=[local], **EXAMPLE_FIELDS
    )
    example.test_files.set(files)
    estimate = campaign_duration(campaign=example)
    assert estimate.unknown == 0 and estimate.seconds is not None, estimate
    took_s = launch_took_s(example, celery_worker)
    assert took_s / 2 <= estimate.seconds <= took_s * 2, (estimate, took_s)
