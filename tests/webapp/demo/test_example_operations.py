"""The example campaigns of issue 20's operations that `manage.py bootstrap` makes (a write, a
metadata storm, a third-party copy, a recorded job's replay): they pass the checks a campaign
saved by hand passes (the token doors' lab credential may write to their scratch), and
launched on the test lab by a real worker every run succeeds, does what its operation does
and leaves none of its files in the sites' scratch folders."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.workers.test_celery import wait_for_final
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.campaigns.validation import campaign_operation_errors, campaign_trace_errors
from webapp.demo.examples import EXAMPLES
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.django_db(transaction=True)

OPERATION_EXAMPLES = [example for example in EXAMPLES if example.operations != ["read"]]
# Every run of the four, on the test profile: generous, they take seconds.
RUNS_TIMEOUT_S = 240


def test_the_operation_examples_cover_writes_storms_copies_and_replay() -> None:
    operations = {o for example in OPERATION_EXAMPLES for o in example.operations}
    assert operations == {"write", "stat", "open", "list", "tpc-pull", "tpc-push", "replay"}


def test_each_operation_example_passes_the_campaign_checks_and_runs_green_on_the_lab(
    lab: Any, settings: Any, tmp_path: Path, start_celery_worker: Any
) -> None:
    settings.FEDPROBE_LAB_DIR = lab.state_dir
    settings.VAR_DIR = tmp_path
    call_command("bootstrap", stdout=io.StringIO())
    campaigns = [Campaign.objects.get(name=example.name) for example in OPERATION_EXAMPLES]
    for campaign in campaigns:
        endpoints = list(campaign.endpoints.all())
        destination = campaign.destination_endpoint
        checks = campaign_operation_errors(
            operations=campaign.operations, endpoints=endpoints, destination=destination
        )
        checks |= campaign_trace_errors(operations=campaign.operations, trace=campaign.trace)
        assert checks == {}, campaign.name
    # Measured from a vantage point of the test's own, so that no other worker of the session
    # takes the runs, verifying TLS servers against the CA folder bootstrap made (as bin/run).
    vantage_point = VantagePoint.objects.create(name="operation-examples")
    for campaign in campaigns:
        campaign.vantage_points.set([vantage_point])
    worker = start_celery_worker(
        "operation-examples",
        env={"FEDPROBE_VAR_DIR": str(tmp_path), "FEDPROBE_CA_DIR": str(tmp_path / "ca")},
    )
    launched = [run for c in campaigns for run in campaign_launch(campaign=c, trigger="manual")]
    assert len(launched) == sum(c.matrix_size() for c in campaigns)
    runs = wait_for_final(launched, worker, timeout_s=RUNS_TIMEOUT_S)
    assert {r.status for r in runs} == {Run.Status.SUCCEEDED}, [
        (r.operation, r.endpoint.name, r.errors) for r in runs if r.errors
    ]
    for campaign in campaigns:
        mine = [r for r in runs if r.campaign_id == campaign.pk]
        busy_s = sum((r.finished_at - r.started_at).total_seconds() for r in mine)
        print(f"  {campaign.name}: {len(mine)} runs, {busy_s:.1f} s")  # pytest -s shows it
        for run in mine:
            assert_did_its_operation(run)
    # What the writes and copies made (fedprobe-<run id>-c<client>-f<k>) is gone.
    tags = {f"fedprobe-{run.run_tag}-" for run in runs}
    for site in ("near", "far"):
        left = [p.name for p in (lab.data_dir(site) / "scratch" / site).iterdir()]
        assert not [name for name in left if name.startswith(tuple(tags))], (site, left)
    # The pages ./bin/run's user opens next (the results page's script: tests/browser).
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    for campaign in campaigns:
        assert client.get(f"/campaigns/{campaign.pk}/results/").status_code == 200
    for run in runs:
        assert client.get(f"/runs/{run.pk}/").status_code == 200


def assert_did_its_operation(run: Run) -> None:
    """What the run JSON says a run of its operation did (docs/engine.md)."""
    result = run.result or {}
    if run.operation == "write":
        assert result["bytes_written"] == run.clients * run.file_size
        assert result["server_checksum"], result
    elif run.operation in ("tpc-pull", "tpc-push"):
        tpc = result["tpc"]
        assert tpc["destination"].startswith(run.destination_endpoint.base_url)
        assert tpc["rate_mbps"] > 0 and tpc["markers"], tpc
    elif run.operation in ("stat", "open", "list"):
        assert run.ops == run.clients * run.ops_per_client
        assert result["ops_per_s"] > 0
    else:
        trace = run.campaign.trace
        assert run.operation == "replay" and trace is not None
        assert run.bytes_read == run.clients * trace.bytes_read
