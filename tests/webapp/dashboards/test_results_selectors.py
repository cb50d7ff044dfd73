"""The campaign results selector on known runs: medians, crossovers, failures, query counts."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from tests.webapp.factories import (
    CampaignFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
)
from tests.webapp.sqlite import only_on_postgresql
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.selectors.results import (
    ResultsFilter,
    campaign_results,
    crossover,
    percentile_cont,
    results_cells,
)
from webapp.dashboards.selectors.results_guidance import CHART_TITLES, charts_not_drawn
from webapp.sites.models import TestFile

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

SUCCEEDED = Run.Status.SUCCEEDED


@pytest.fixture
def test_file() -> TestFile:
    return TestFileFactory(endpoint__name="near-root", endpoint__site=SiteFactory(name="near"))


@pytest.fixture
def campaign(test_file: TestFile) -> Campaign:
    return CampaignFactory(endpoints=[test_file.endpoint])


def measured(campaign: Campaign, test_file: TestFile, **fields: Any) -> Run:
    """A run of `campaign` with results (by default a succeeded direct random 64k read)."""
    values: dict[str, Any] = {
        "status": SUCCEEDED,
        "wall_s": 1.0,
        "open_s": 0.01,
        "ttfb_s": 0.02,
        "throughput_mbps": 50.0,
        "bytes_requested": 1000,
        "bytes_read": 1000,
        "bytes_wire": 1000,
        "result": {"client_throughput_mbps": 25.0},
    }
    values.update(fields)
    return RunFactory(campaign=campaign, test_file=test_file, **values)


def test_cells_hold_medians_over_repetitions_and_their_spread(
    campaign: Campaign, test_file: TestFile
) -> None:
    for wall_s, wire in ((1.0, 1000), (2.0, 3000), (10.0, 5000)):
        measured(campaign, test_file, wall_s=wall_s, bytes_wire=wire)
    (cell,) = campaign_results(campaign=campaign).cells
    assert cell["runs"] == 3
    assert cell["wall_s"] == 2.0
    assert (cell["wall_s_p25"], cell["wall_s_p75"]) == (1.5, 6.0)
    assert cell["bytes_wire"] == 3000
    assert cell["client_throughput_mbps"] == 25.0
    assert cell["endpoint"] == test_file.endpoint_id and cell["vantage_point"] == "local"
    assert (cell["method"], cell["pattern"], cell["read_size"]) == ("direct", "random", 65536)


def test_cancelled_failed_and_unfinished_runs_stay_out_of_the_medians(
    campaign: Campaign, test_file: TestFile
) -> None:
    measured(campaign, test_file, wall_s=1.0)
    measured(campaign, test_file, wall_s=3.0, status=Run.Status.PARTIAL)
    for status in (Run.Status.CANCELLED, Run.Status.FAILED, Run.Status.TIMEOUT, Run.Status.QUEUED):
        measured(campaign, test_file, wall_s=100.0, status=status)
    (cell,) = campaign_results(campaign=campaign).cells
    assert cell["runs"] == 2
    assert cell["wall_s"] == 2.0


def test_parameter_sets_are_cells_of_their_own(campaign: Campaign, test_file: TestFile) -> None:
    measured(campaign, test_file, method="direct", fraction=0.5, wall_s=1.0)
    measured(campaign, test_file, method="copy", fraction=0.5, wall_s=2.0)
    measured(campaign, test_file, method="copy", fraction=1.0, wall_s=3.0)
    measured(campaign, test_file, method="copy", fraction=1.0, wall_s=3.0, readahead=524288)
    results = campaign_results(campaign=campaign)
    keys = [(c["method"], c["fraction"], c["readahead"], c["wall_s"]) for c in results.cells]
    assert sorted(keys) == [
        ("copy", 0.5, 0, 2.0),
        ("copy", 1.0, 0, 3.0),
        ("copy", 1.0, 524288, 3.0),
        ("direct", 0.5, 0, 1.0),
    ]
    data = results.to_json()
    assert data["dimensions"]["method"] == ["copy", "direct"]
    assert data["dimensions"]["fraction"] == [0.5, 1.0]
    assert set(data["varying"]) == {"method", "fraction", "readahead"}


def test_the_crossover_is_interpolated_between_measured_fractions(
    campaign: Campaign, test_file: TestFile
) -> None:
    for fraction, direct_s in ((0.2, 1.0), (0.4, 2.0), (0.6, 3.0), (0.8, 4.0), (1.0, 5.0)):
        measured(campaign, test_file, method="direct", fraction=fraction, wall_s=direct_s)
        measured(campaign, test_file, method="copy", fraction=fraction, wall_s=2.6)
    (found,) = campaign_results(campaign=campaign).crossovers
    # direct - copy: -0.6 at 40%, +0.4 at 60%: zero at 40% + 20% * 0.6 / 1.0 = 52%
    assert found.fraction == pytest.approx(0.52)
    assert found.kind == "crossover"
    assert found.text == "Reading more than 52% of the file, copying first is faster on near-root."
    assert found.key["endpoint"] == test_file.endpoint_id and found.key["clients"] == 2


def test_the_crossover_uses_medians_not_single_runs(
    campaign: Campaign, test_file: TestFile
) -> None:
    for wall_s in (1.0, 1.0, 50.0):  # one slow repetition does not move the median
        measured(campaign, test_file, method="direct", fraction=0.5, wall_s=wall_s)
    measured(campaign, test_file, method="direct", fraction=1.0, wall_s=3.0)
    measured(campaign, test_file, method="copy", fraction=0.5, wall_s=2.0)
    measured(campaign, test_file, method="copy", fraction=1.0, wall_s=2.0)
    (found,) = campaign_results(campaign=campaign).crossovers
    assert found.fraction == pytest.approx(0.75)


def test_one_crossover_per_parameter_set(campaign: Campaign, test_file: TestFile) -> None:
    for clients in (1, 4):
        for fraction in (0.5, 1.0):
            measured(campaign, test_file, method="direct", fraction=fraction, clients=clients)
            measured(campaign, test_file, method="copy", fraction=fraction, clients=clients)
    crossovers = campaign_results(campaign=campaign).crossovers
    assert sorted(c.key["clients"] for c in crossovers) == [1, 4]


def test_writes_have_a_method_but_no_crossover(campaign: Campaign, test_file: TestFile) -> None:
    """A campaign's axes apply to every operation: its writes are "direct" and "copy" too,
    at each fraction, and read nothing to cross over."""
    for fraction in (0.5, 1.0):
        for method, wall_s in (("direct", 1.0 + fraction), ("copy", 1.6)):
            measured(campaign, test_file, method=method, fraction=fraction, wall_s=wall_s)
            measured(
                campaign, test_file, operation="write", method=method, fraction=fraction, wall_s=9.0
            )
    (found,) = campaign_results(campaign=campaign).crossovers
    assert found.key["operation"] == "read" and found.kind == "crossover"


@pytest.mark.parametrize(
    ("direct", "copy", "kind", "fraction", "text"),
    [
        (
            {0.1: 1.0, 0.5: 2.0, 1.0: 3.0},
            {0.1: 5.0, 0.5: 5.0, 1.0: 5.0},
            "direct-faster",
            None,
            "Reading directly is faster at every measured fraction (10%-100%) on e: "
            "no crossover in the measured range.",
        ),
        (
            {0.1: 6.0, 1.0: 9.0},
            {0.1: 5.0, 1.0: 5.0},
            "copy-faster",
            None,
            "Copying first is faster at every measured fraction (10%-100%) on e: "
            "no crossover in the measured range.",
        ),
        (
            {0.5: 1.0},
            {0.5: 2.0},
            "too-few-fractions",
            None,
            "Direct and copy were measured together at fewer than two fractions on e: "
            "add fractions (e.g. 0.1, 0.25, 0.5, 0.75, 1) to find the crossover.",
        ),
        (
            {0.25: 1.0, 0.5: 2.0, 0.75: 3.0},
            {0.25: 2.0, 0.5: 2.0, 0.75: 2.0},
            "crossover",
            0.5,
            "Reading more than 50% of the file, copying first is faster on e.",
        ),
        (
            {0.5: 1.0, 0.75: 3.0},
            {0.5: 2.0, 0.75: 2.0},
            "crossover",
            0.625,
            "Reading more than 63% of the file, copying first is faster on e.",
        ),
        (
            {0.25: 1.0, 0.5: 3.0, 0.75: 1.0, 1.0: 3.0},
            {0.25: 2.0, 0.5: 2.0, 0.75: 2.0, 1.0: 2.0},
            "crossover",
            0.375,
            "Reading more than 38% of the file, copying first is faster on e. The lines "
            "cross 3 times between 25%-100%: more repetitions would tell a trend from noise.",
        ),
        (
            {0.1: 1.0, 1.0: 1.0},
            {0.1: 1.0, 1.0: 1.0},
            "no-difference",
            None,
            "Reading directly and copying first take as long at every measured fraction "
            "(10%-100%) on e.",
        ),
    ],
)
def test_the_crossover_sentence(
    direct: dict[float, float],
    copy: dict[float, float],
    kind: str,
    fraction: float | None,
    text: str,
) -> None:
    found = crossover(direct, copy, where="e")
    assert found["kind"] == kind
    assert found["fraction"] == (None if fraction is None else pytest.approx(fraction))
    assert found["text"] == text


def test_a_crossover_where_copying_stops_being_faster_is_said_so() -> None:
    found = crossover({0.2: 3.0, 0.4: 1.0}, {0.2: 2.0, 0.4: 2.0}, where="e")
    assert found["fraction"] == pytest.approx(0.3)
    assert found["text"].startswith("Reading less than 30% of the file, copying first is faster")


def test_failures_are_counted_by_endpoint_method_and_first_error_class(
    campaign: Campaign, test_file: TestFile
) -> None:
    timeout = [{"class": "timeout", "message": "no answer", "client": 0}]
    refused = [{"class": "refused", "message": "closed", "client": None}]
    short = [{"class": "short-read", "message": "eof", "client": 1}]
    for _ in range(3):
        measured(campaign, test_file)
    measured(campaign, test_file, status=Run.Status.TIMEOUT, errors=timeout, wall_s=None)
    measured(campaign, test_file, status=Run.Status.TIMEOUT, errors=timeout, wall_s=None)
    measured(campaign, test_file, status=Run.Status.FAILED, errors=refused, wall_s=None)
    measured(campaign, test_file, status=Run.Status.PARTIAL, errors=short)
    measured(campaign, test_file, status=Run.Status.CANCELLED, errors=[], wall_s=None)
    measured(campaign, test_file, status=Run.Status.QUEUED, wall_s=None)
    measured(campaign, test_file, method="copy", status=Run.Status.FAILED, errors=refused)
    results = campaign_results(campaign=campaign)
    counted = {(f["method"], f["error_class"], f["status"]): f for f in results.failures}
    assert {key: f["runs"] for key, f in counted.items()} == {
        ("direct", "timeout", "timeout"): 2,
        ("direct", "refused", "failed"): 1,
        ("direct", "short-read", "partial"): 1,
        ("direct", "cancelled", "cancelled"): 1,
        ("copy", "refused", "failed"): 1,
    }
    assert counted[("direct", "timeout", "timeout")]["of_runs"] == 8  # final direct runs
    assert counted[("copy", "refused", "failed")]["of_runs"] == 1
    assert results.active_runs == 1
    (cell,) = [c for c in results.cells if c["method"] == "direct"]
    assert cell["runs"] == 4  # three succeeded and the partial one


def test_cells_hold_the_medians_of_writes_storms_and_copies(
    campaign: Campaign, test_file: TestFile
) -> None:
    """A write's throughput is its column; a storm's operations per second and a copy's rate
    and time to start come from the run JSON (its tpc), medians over repetitions like the
    rest; null for the operations that do not measure them."""
    for throughput in (40.0, 60.0, 200.0):
        measured(campaign, test_file, operation="write", throughput_mbps=throughput, result={})
    for ops in (900.0, 1100.0):
        measured(campaign, test_file, operation="stat", result={"ops_per_s": ops})
    measured(campaign, test_file, operation="open", result={"ops_per_s": 300.0})
    for rate, start in ((80.0, 0.2), (100.0, 0.4), (120.0, None)):
        tpc = {"rate_mbps": rate, "start_s": start, "markers": []}
        measured(campaign, test_file, operation="tpc-pull", result={"tpc": tpc})
    measured(campaign, test_file)  # a read
    cells = {c["operation"]: c for c in campaign_results(campaign=campaign).cells}
    assert cells["write"]["throughput_mbps"] == 60.0
    assert cells["stat"]["ops_per_s"] == 1000.0 and cells["open"]["ops_per_s"] == 300.0
    assert cells["tpc-pull"]["tpc_rate_mbps"] == 100.0
    assert cells["tpc-pull"]["tpc_start_s"] == pytest.approx(0.3)  # nulls left out
    assert cells["read"]["ops_per_s"] is None
    assert cells["read"]["tpc_rate_mbps"] is cells["stat"]["tpc_start_s"] is None


def test_a_campaign_without_reads_says_which_charts_answer_it(test_file: TestFile) -> None:
    """A storm draws its own chart, and no read chart: each says the campaign runs storms,
    not reads, and names the chart that answers it (the page lists them in one line)."""
    storm = CampaignFactory(
        endpoints=[test_file.endpoint], operations=["stat", "open", "list"], clients=[1, 4]
    )
    for operation in ("stat", "open", "list"):
        for clients in (1, 4):
            measured(storm, test_file, operation=operation, clients=clients, result={})
    results = campaign_results(campaign=storm)
    data = results.to_json()
    assert data["operations"] == ["stat", "open", "list"]
    assert data["operation_charts"] == ["metadata"]
    assert set(results.not_asked) == set(CHART_TITLES)
    (reason,) = set(results.not_asked.values())
    assert reason == (
        "this campaign runs stat, open and list, not reads: the page draws what it measures "
        "in Metadata operations per second vs clients."
    )
    (line,) = charts_not_drawn(results.not_asked)
    assert line["id"].split() == list(CHART_TITLES)
    assert line["title"].startswith("The read charts (Time to read vs fraction")


def test_the_read_charts_are_asked_of_reads_only(test_file: TestFile) -> None:
    """Reads and writes in one campaign: the writes' two client counts are their own chart's,
    the reads' one client count still says what to add; copies have two charts."""
    mixed = CampaignFactory(
        endpoints=[test_file.endpoint], operations=["read", "write", "tpc-push"], clients=[2]
    )
    measured(mixed, test_file, clients=2)
    for clients in (1, 4):
        measured(mixed, test_file, operation="write", clients=clients, result={})
    results = campaign_results(campaign=mixed)
    assert results.operations == ["read", "write", "tpc-push"]
    assert results.to_json()["operation_charts"] == ["write", "tpc-rate", "tpc-start"]
    assert results.guidance["clients"] == (
        "This campaign measures one client count: add client counts (e.g. 1, 4, 16) to see how "
        "throughput and open time change with them."
    )
    assert results.not_asked["throughput"].startswith("this campaign runs one client count")


def test_failures_are_counted_per_operation(campaign: Campaign, test_file: TestFile) -> None:
    refused = [{"class": "auth", "message": "read-only token", "client": 0}]
    measured(campaign, test_file)
    measured(campaign, test_file, operation="write", status=Run.Status.FAILED, errors=refused)
    measured(campaign, test_file, operation="write")
    (failure,) = campaign_results(campaign=campaign).failures
    assert (failure["operation"], failure["method"], failure["error_class"]) == (
        "write",
        "direct",
        "auth",
    )
    assert (failure["runs"], failure["of_runs"]) == (1, 2)  # of the writes, not the reads


def test_filters_choose_the_runs_read(campaign: Campaign, test_file: TestFile) -> None:
    far = TestFileFactory(endpoint__name="far-root")
    campaign.endpoints.add(far.endpoint)
    measured(campaign, test_file, method="direct", wall_s=1.0)
    measured(campaign, test_file, method="copy", wall_s=2.0)
    measured(campaign, far, method="copy", wall_s=4.0)
    old = measured(campaign, far, method="copy", wall_s=40.0)
    Run.objects.filter(pk=old.pk).update(created_at=datetime(2020, 1, 2, 23, 59, tzinfo=UTC))
    RunFactory(test_file=test_file, status=SUCCEEDED, wall_s=9.0)  # another campaign's

    def walls(**filters: Any) -> list[float]:
        cells = campaign_results(campaign=campaign, filters=ResultsFilter(**filters)).cells
        return sorted(c["wall_s"] for c in cells)

    assert walls() == [1.0, 2.0, 22.0]
    assert walls(method=["copy"]) == [2.0, 22.0]
    assert walls(endpoint=[test_file.endpoint_id], method=["direct", "copy"]) == [1.0, 2.0]
    assert walls(until=date(2020, 1, 2)) == [40.0]
    assert walls(since=date(2020, 1, 3)) == [1.0, 2.0, 4.0]
    assert walls(vantage_point=["elsewhere"]) == []


def test_the_selector_reads_in_four_queries_however_many_runs(
    campaign: Campaign, test_file: TestFile, django_assert_num_queries: Any
) -> None:
    other = VantagePointFactory(name="remote")
    for size in (1, 20):
        for i in range(size):
            measured(campaign, test_file, fraction=(i % 5 + 1) / 5, method="copy")
            measured(campaign, test_file, vantage_point=other, status=Run.Status.TIMEOUT)
            operation = ("write", "stat", "tpc-pull", "replay")[i % 4]
            measured(campaign, test_file, operation=operation, clients=i % 3 + 1)
        with django_assert_num_queries(4):
            results = campaign_results(campaign=campaign)
            results.to_json()
        assert results.endpoints[0]["site"] == "near"


@only_on_postgresql
def test_the_python_medians_match_postgresql(campaign: Campaign, test_file: TestFile) -> None:
    for i, wall_s in enumerate((1.0, 2.5, 2.0, 7.0, 3.0, None)):
        measured(
            campaign,
            test_file,
            wall_s=wall_s,
            fraction=0.5 if i % 2 else 1.0,
            bytes_wire=1000 * i + 1,
            result={"client_throughput_mbps": float(i)} if i != 3 else None,
        )
        measured(campaign, test_file, operation="stat", result={"ops_per_s": 100.0 * i + 0.5})
        tpc = {"rate_mbps": 10.0 * i, "start_s": 0.1 * i if i % 3 else None}
        measured(campaign, test_file, operation="tpc-push", fraction=0.5, result={"tpc": tpc})
    runs = Run.objects.filter(campaign=campaign)
    assert results_cells(runs=runs, in_database=False) == results_cells(runs=runs, in_database=True)


def test_percentile_cont_is_postgresqls() -> None:
    assert percentile_cont([3.0, 1.0, None, 2.0, 10.0], 0.5) == 2.5
    assert percentile_cont([1.0, 2.0, 10.0], 0.75) == 6.0
    assert percentile_cont([None], 0.5) is None
