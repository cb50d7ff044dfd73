"""A run's parameters are defined once (RUN_PARAMETERS): every engine parameter of a
measurement has its Run column and Campaign field, and the status groups are Run.Status's."""

from __future__ import annotations

import dataclasses

import pytest

from tests.webapp.factories import CampaignFactory, TestFileFactory
from webapp.campaigns.models import LAUNCH_FIELDS, RUN_PARAMETERS, Campaign, Run
from webapp.sites.models import VantagePoint
from workers.engine.params import RunParams

# RunParams fields that are not a run's parameters: where it reads, and what this host adds.
NOT_PARAMETERS = {
    "urls",
    "seed",
    "adler32",
    "scratch_dir",
    "file_roots",
    "egress",
    "credential",
    "destination_credential",  # the destination endpoint's, as credential is the endpoint's
    "ca_dir",
    "credential_s",  # measured by the worker (the token request), not chosen
    "credential_hosts",  # the endpoint's, not the campaign's
}


def test_every_engine_parameter_is_a_run_parameter() -> None:
    engine = {f.name for f in dataclasses.fields(RunParams)} - NOT_PARAMETERS - set(LAUNCH_FIELDS)
    assert {p.engine_field for p in RUN_PARAMETERS} == engine


def test_every_run_parameter_has_a_run_column_and_a_campaign_field() -> None:
    for parameter in RUN_PARAMETERS:
        Run._meta.get_field(parameter.name)
        Campaign._meta.get_field(parameter.campaign_field)


def test_status_groups_split_the_statuses() -> None:
    status = Run.Status
    assert set(status.ACTIVE) | set(status.FINAL) == set(status)
    assert not set(status.ACTIVE) & set(status.FINAL)
    assert set(status.ENDED) == set(status.FINAL) - {status.CANCELLED}
    assert set(status.UNMEASURED) == set(status.FINAL) - set(status.MEASURED)
    assert Run.FINAL == status.FINAL
    assert "queued" in status.ACTIVE


@pytest.mark.django_db
def test_a_cell_becomes_a_run_with_every_parameter() -> None:
    test_file = TestFileFactory(adler32="0000abcd")
    campaign = CampaignFactory(
        endpoints=[test_file.endpoint],
        vantage_points=[VantagePoint.local()],
        read_sizes=[8192],
        depth=7,
        streams=2,
        deadline_s=30,
    )
    (cell,) = campaign.cells()
    run = Run.from_cell(cell, campaign=campaign, trigger=Run.Trigger.API)
    assert (run.read_size, run.depth, run.streams, run.deadline_s) == (8192, 7, 2, 30)
    assert run.trigger == Run.Trigger.API
    params = run.measured_params()
    assert (params.read_size, params.depth, params.streams, params.timeout_s) == (8192, 7, 2, 30)
    assert params.urls == (test_file.url,)
    assert params.adler32 == ((test_file.url, "0000abcd"),)


@pytest.mark.django_db
def test_the_local_vantage_point_is_made_once() -> None:
    assert VantagePoint.local() == VantagePoint.local()
    assert VantagePoint.local().name == VantagePoint.LOCAL
    assert VantagePoint.objects.filter(name=VantagePoint.LOCAL).count() == 1
