"""A campaign's address family (issue 20 item 4): `each` is two runs in every cell, one
pinned to IPv4 and one to IPv6 (the matrix, the estimates, the launch, the runs filter and the
pages show them apart); bad values and protocols that cannot be held to a family are refused
naming address_family; whether a name has both families is found by each run, before any
request, never when the campaign is saved. The lab listens on 127.0.0.1 and ::1."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    api_for,
    page_for,
    user,
)
from tests.workers.test_celery import lab_endpoint
from webapp.campaigns.estimates import campaign_duration, campaign_planned_runs
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch, campaign_preview, run_execute
from webapp.dashboards.selectors.compare import compare_data
from webapp.dashboards.selectors.results import campaign_results
from webapp.sites.models import Endpoint, VantagePoint
from workers.engine.params import AddressFamily
from workers.lab.files import MiB

pytestmark = pytest.mark.django_db

CAMPAIGNS = "/api/v1/campaigns/"


def body_axes() -> dict[str, Any]:
    return {
        "methods": ["direct"],
        "patterns": ["random"],
        "read_sizes": [4096, 65536],
        "fractions": [0.1],
        "clients": [1],
    }


def body(endpoint: Endpoint, **fields: Any) -> dict[str, Any]:
    return {"name": "both families", "endpoints": [endpoint.pk], **body_axes(), **fields}


def test_each_is_one_run_per_family_in_every_cell_pinned_and_filtered_apart() -> None:
    olga = user("olga")
    api = api_for(olga)
    endpoint = EndpointFactory(name="dual", base_url="root://dual.invalid:1094/")
    test_file = TestFileFactory(endpoint=endpoint, path="/data/f", size=MiB)
    # History: one run like a cell's, pinned to IPv4: it estimates the IPv4 run only.
    now = timezone.now()
    RunFactory(
        test_file=test_file,
        vantage_point=VantagePoint.local(),
        pattern="random",
        read_size=4096,
        fraction=0.1,
        clients=1,
        address_family="4",
        status=Run.Status.SUCCEEDED,
        started_at=now - timedelta(seconds=30),
        finished_at=now - timedelta(seconds=20),
    )
    # No DNS at save time: the name resolves nowhere, and the campaign is saved.
    made = api.post(CAMPAIGNS, body(endpoint, address_family="each"), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["address_family"] == "each"
    assert made.json()["matrix_size"] == 4  # 2 read sizes x 2 families
    campaign = Campaign.objects.get(pk=made.json()["id"])
    assert campaign_preview(campaign=campaign).runs == 4
    planned = campaign_planned_runs(campaign=campaign)
    assert sorted(p.values["address_family"] for p in planned) == ["4", "4", "6", "6"]
    estimate = campaign_duration(campaign=campaign)
    assert (estimate.runs, estimate.same_parameters) == (4, 1)
    one_family = campaign_duration(campaign=CampaignFactory(endpoints=[endpoint], **body_axes()))
    assert estimate.upper_s == pytest.approx(2 * one_family.upper_s)
    listed = {c["id"]: c for c in api.get(CAMPAIGNS).json()["results"]}
    assert listed[campaign.pk]["matrix_size"] == 4

    runs = campaign_launch(campaign=campaign, trigger="api")
    assert sorted((r.read_size, r.address_family) for r in runs) == [
        (4096, "4"),
        (4096, "6"),
        (65536, "4"),
        (65536, "6"),
    ]
    for run in runs:
        pinned = Run.objects.get(pk=run.pk).engine_params().address_family
        assert pinned == AddressFamily(run.address_family) != AddressFamily.EACH
        assert api.get(f"/api/v1/runs/{run.pk}/").json()["address_family"] == run.address_family
    v6 = api.get("/api/v1/runs/", {"campaign": campaign.pk, "address_family": "6"}).json()
    assert sorted(r["id"] for r in v6["results"]) == sorted(
        r.pk for r in runs if r.address_family == "6"
    )
    assert {r["address_family"] for r in v6["results"]} == {"6"}
    bad = api.get("/api/v1/runs/", {"address_family": "each"})
    assert bad.status_code == 400 and list(bad.json()) == ["address_family"]
    page = page_for(olga)
    listing = page.get("/runs/", {"campaign": campaign.pk, "address_family": "4"})
    text = listing.content.decode()
    assert text.count(" · IPv4") == 2 and " · IPv6" not in text
    detail = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "each: every cell twice, one run pinned to IPv4 and one to IPv6" in detail


def test_a_bad_family_or_one_a_protocol_cannot_hold_is_refused_naming_the_field(
    settings: Any, tmp_path: Any
) -> None:
    olga = user("olga")
    api = api_for(olga)
    endpoint = EndpointFactory()
    TestFileFactory(endpoint=endpoint)
    answer = api.post(CAMPAIGNS, body(endpoint, address_family="both"), format="json")
    assert answer.status_code == 400 and list(answer.json()) == ["address_family"]
    settings.FEDPROBE_FILE_ROOTS = [str(tmp_path)]
    local = EndpointFactory(name="local-files", protocol="file", base_url=f"file://{tmp_path}/")
    TestFileFactory(endpoint=local)
    for family in ("4", "each"):
        answer = api.post(CAMPAIGNS, body(local, address_family=family), format="json")
        assert answer.status_code == 400, answer.content
        assert list(answer.json()) == ["address_family"]
        assert (
            "endpoint local-files: file:// connects nowhere" in answer.json()["address_family"][0]
        )
    form = {
        "name": "files",
        "endpoints": [local.pk],
        "methods": "direct",
        "patterns": "random",
        "read_sizes": "4k",
        "fractions": "0.1",
        "clients": "1",
        "address_family": "each",
    }
    refused = page_for(olga).post("/campaigns/new/", form).content.decode()
    assert "address_family: endpoint local-files: file:// connects nowhere" in refused
    assert not Campaign.objects.exists()
    made = api.post(CAMPAIGNS, body(local), format="json")  # any: the client's choice
    assert made.status_code == 201, made.content


def test_compare_matrix_and_results_put_the_two_families_side_by_side() -> None:
    endpoint = EndpointFactory()
    test_file = TestFileFactory(endpoint=endpoint, size=MiB)
    campaign = CampaignFactory(endpoints=[endpoint], address_family="each")
    for family, throughput in (("4", 100.0), ("4", 110.0), ("6", 20.0)):
        RunFactory(
            campaign=campaign,
            test_file=test_file,
            address_family=family,
            status=Run.Status.SUCCEEDED,
            throughput_mbps=throughput,
        )
    run = Run.objects.first()
    assert run is not None
    day = run.created_at.date()
    data = compare_data(endpoints=[endpoint], metric="throughput_mbps", since=day, until=day)
    assert [(s["address_family"], s["runs"]) for s in data["parameter_sets"]] == [
        ("4", 2),
        ("6", 1),
    ]
    assert data["parameter_set"] is not None and data["parameter_set"]["address_family"] == "4"
    assert data["series"][0]["median"] == [105.0]
    v6 = compare_data(
        endpoints=[endpoint],
        metric="throughput_mbps",
        since=day,
        until=day,
        parameters={"address_family": "6"},
    )
    assert v6["series"][0]["median"] == [20.0]
    api = api_for(user("vera", role="viewer"))
    compared = api.get(
        "/api/v1/compare/", {"endpoint": endpoint.pk, "address_family": "6", "since": day}
    ).json()
    assert compared["parameter_set"]["address_family"] == "6"
    matrix = api.get("/api/v1/matrix/", {"address_family": "6"}).json()
    assert matrix["parameter_set"]["address_family"] == "6"
    assert matrix["parameter_set"]["label"].endswith(" · IPv6")
    cells = campaign_results(campaign=campaign).cells
    assert sorted((c["address_family"], c["runs"]) for c in cells) == [("4", 2), ("6", 1)]
    results = api.get(f"/api/v1/campaigns/{campaign.pk}/results/", {"address_family": "6"})
    assert results.status_code == 200, results.content
    assert [c["address_family"] for c in results.json()["cells"]] == ["6"]


@pytest.mark.lab
def test_on_the_lab_each_run_keeps_to_its_family_and_a_name_without_it_fails_first(
    lab: Any,
) -> None:
    """The lab listens on 127.0.0.1 and ::1: its endpoint named by 127.0.0.1 has no IPv6
    address and the same server named by [::1] no IPv4 one. Of each cell's two runs, the one
    of the family the name has measures over it; the other fails before any request (the
    engine's class, refused), saying which family the name lacks."""
    v4 = lab_endpoint(lab, "local-root")
    assert "//127.0.0.1:" in v4.base_url
    v6 = Endpoint.objects.create(
        site=v4.site,
        name="local-root-v6",
        protocol=v4.protocol,
        base_url=v4.base_url.replace("127.0.0.1", "[::1]"),
    )
    source = v4.files.get(size=MiB)
    v6_file = v6.files.create(path=source.path, size=source.size, is_default=True)
    campaign = Campaign.objects.create(
        name="both families on the lab",
        methods=["direct"],
        patterns=["random"],
        read_sizes=[65536],
        fractions=[0.1],
        clients=[1],
        address_family="each",
    )
    campaign.endpoints.set([v4, v6])
    campaign.test_files.set([source, v6_file])
    campaign.vantage_points.set([VantagePoint.local()])
    runs = campaign_launch(campaign=campaign, trigger="api")
    for run in runs:
        run_execute(run_id=run.pk, worker="test@host")
    outcome = {
        (r.endpoint.name, r.address_family): r for r in Run.objects.filter(campaign=campaign)
    }
    assert len(outcome) == 4
    for name, family, address in (("local-root", "4", "127.0.0.1"), ("local-root-v6", "6", "::1")):
        measured = outcome[(name, family)]
        assert measured.status == Run.Status.SUCCEEDED, measured.errors
        assert measured.result is not None
        assert (measured.result["address_family"], measured.result["address"]) == (family, address)
    for name, family, lacking in (("local-root", "6", "IPv6"), ("local-root-v6", "4", "IPv4")):
        refused = outcome[(name, family)]
        assert refused.status == Run.Status.FAILED
        assert refused.errors[0]["class"] == "refused", refused.errors
        assert f"no {lacking} address for host" in refused.errors[0]["message"]
        assert not refused.bytes_read and not refused.attempts.filter(bytes_read__gt=0).exists()
