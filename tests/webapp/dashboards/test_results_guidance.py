"""What the results page says instead of a chart (from what the campaign asks for, and the
runs still to come), and the order of the latency-hiding chart's endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.selectors.results import campaign_results
from webapp.sites.models import TestFile

pytestmark = pytest.mark.django_db


def run(campaign: Campaign, test_file: TestFile, status: str, **fields: Any) -> Run:
    values: dict[str, Any] = {
        "method": "direct",
        "pattern": "random",
        "read_size": 65536,
        "fraction": 0.5,
        "clients": 1,
    }
    if status == Run.Status.SUCCEEDED:
        values.update(wall_s=1.0, ttfb_s=0.01, open_s=0.01, throughput_mbps=10.0)
    values.update(fields)
    return RunFactory(campaign=campaign, test_file=test_file, status=status, **values)


@pytest.fixture
def test_file() -> TestFile:
    return TestFileFactory(endpoint__name="near-root")


def direct_and_copy(test_file: TestFile, **asked: Any) -> Campaign:
    lists = {"patterns": ["random", "sequential"], "fractions": [0.5, 1.0], "clients": [1]}
    return CampaignFactory(
        endpoints=[test_file.endpoint], methods=["direct", "copy"], **{**lists, **asked}
    )


def test_mid_campaign_the_advice_is_the_runs_still_to_come(test_file: TestFile) -> None:
    """A direct+copy, random+sequential campaign with its first run measured: nothing to add,
    three runs to wait for."""
    campaign = direct_and_copy(test_file)
    run(campaign, test_file, Run.Status.SUCCEEDED)
    run(campaign, test_file, Run.Status.RUNNING, method="copy")
    run(campaign, test_file, Run.Status.QUEUED, pattern="sequential")
    run(campaign, test_file, Run.Status.QUEUED, fraction=1.0)
    guidance = campaign_results(campaign=campaign).guidance

    for name in ("methods", "latency", "fraction"):
        assert guidance[name] is not None
        assert guidance[name].startswith("3 runs still to come"), guidance[name]
        assert "Add" not in guidance[name] and "add " not in guidance[name]
    assert "method copy not measured yet" in guidance["methods"]
    assert "patterns sequential not measured yet" in guidance["latency"]
    assert "fractions of the file 100% not measured yet" in guidance["fraction"]
    assert guidance["clients"] == (
        "This campaign measures one client count: add client counts (e.g. 1, 4, 16) to see "
        "how throughput and open time change with them."
    )


def test_a_campaign_that_asks_for_one_value_is_told_what_to_add(test_file: TestFile) -> None:
    campaign = CampaignFactory(
        endpoints=[test_file.endpoint], methods=["direct"], patterns=["random"], fractions=[0.5]
    )
    run(campaign, test_file, Run.Status.SUCCEEDED)
    run(campaign, test_file, Run.Status.QUEUED)
    guidance = campaign_results(campaign=campaign).guidance
    assert guidance["methods"] is not None and guidance["methods"].startswith(
        "Add methods direct and copy"
    )
    assert guidance["fraction"] is not None and "add fractions" in guidance["fraction"]
    assert guidance["latency"] is not None
    assert "reads with one access pattern" in guidance["latency"]
    assert "Furano & Hanushevsky (2008)" in guidance["latency"]


def test_after_a_cancel_the_crossover_says_which_runs_are_missing(test_file: TestFile) -> None:
    """Direct and copy measured together at 50% only, the copy at 100% cancelled: the
    campaign asks for two fractions, so nothing is to be added, the cancelled run is why."""
    campaign = direct_and_copy(test_file, patterns=["sequential"])
    for method in ("direct", "copy"):
        run(campaign, test_file, Run.Status.SUCCEEDED, method=method, pattern="sequential")
    run(campaign, test_file, Run.Status.SUCCEEDED, pattern="sequential", fraction=1.0)
    run(campaign, test_file, Run.Status.CANCELLED, method="copy", pattern="sequential", fraction=1)
    results = campaign_results(campaign=campaign)

    (found,) = results.crossovers
    assert found.kind == "too-few-fractions"
    assert "add fractions" not in found.text
    assert found.text == (
        "Direct and copy were measured together at fewer than two fractions on near-root, "
        "though the campaign asks for 50%, 100%: the other runs failed, timed out or were "
        "cancelled (see Errors). Launch the campaign again to find the crossover."
    )
    assert results.guidance["methods"] is None and results.guidance["fraction"] is None


def test_while_runs_are_to_come_the_crossover_says_so(test_file: TestFile) -> None:
    campaign = direct_and_copy(test_file)
    for method in ("direct", "copy"):
        run(campaign, test_file, Run.Status.SUCCEEDED, method=method)
    run(campaign, test_file, Run.Status.QUEUED, fraction=1.0)
    (found,) = campaign_results(campaign=campaign).crossovers
    assert found.text.endswith("so far: 1 run still to come. Reload when they end.")


def test_a_failed_value_is_not_advice_to_add_it(test_file: TestFile) -> None:
    campaign = direct_and_copy(test_file, read_sizes=[4096, 65536])
    run(campaign, test_file, Run.Status.SUCCEEDED)
    run(campaign, test_file, Run.Status.FAILED, read_size=4096)
    advice = campaign_results(campaign=campaign).guidance["read_size"]
    assert advice is not None and advice.startswith("No run measured read sizes 4 KiB")


def latency_campaign() -> tuple[Campaign, TestFile, TestFile]:
    """near: 2 ms away, its copies slow to the first byte (they wait for the whole file);
    far: 10 ms away, direct reads only. Over all runs, far's first byte comes sooner."""
    near = TestFileFactory(endpoint__name="near-root")
    far = TestFileFactory(endpoint__name="far-root")
    campaign = CampaignFactory(
        endpoints=[near.endpoint, far.endpoint],
        methods=["direct", "copy"],
        patterns=["random", "async"],
    )
    return campaign, near, far


def test_latency_chart_orders_endpoints_by_round_trip_time() -> None:
    campaign, near, far = latency_campaign()
    for pattern in ("random", "async"):
        for method, ttfb_s in (("direct", 0.004), ("copy", 0.9)):
            run(
                campaign,
                near,
                Run.Status.SUCCEEDED,
                method=method,
                pattern=pattern,
                ttfb_s=ttfb_s,
                result={"preflight_rtt_ms": 2.1},
            )
        run(
            campaign,
            far,
            Run.Status.SUCCEEDED,
            pattern=pattern,
            ttfb_s=0.02,
            result={"preflight_rtt_ms": 10.4},
        )
    ((order,),) = [campaign_results(campaign=campaign).latency_order]
    assert order == {
        "vantage_point": "local",
        "by": "rtt",
        "endpoints": [near.endpoint_id, far.endpoint_id],
        "text": "Endpoints in order of their round-trip time (measured before each run): "
        "near-root 2.1 ms, far-root 10.4 ms.",
    }


def test_without_round_trip_times_the_direct_reads_first_byte_orders_them() -> None:
    campaign, near, far = latency_campaign()
    for method, ttfb_s in (("direct", 0.004), ("copy", 0.9), ("copy", 0.8)):
        run(campaign, near, Run.Status.SUCCEEDED, method=method, ttfb_s=ttfb_s)
    run(campaign, far, Run.Status.SUCCEEDED, ttfb_s=0.02)
    (order,) = campaign_results(campaign=campaign).latency_order
    assert (order["by"], order["endpoints"]) == (
        "direct-ttfb",
        [near.endpoint_id, far.endpoint_id],
    )
    assert order["text"].endswith("recorded no round-trip time): near-root 4 ms, far-root 20 ms.")
