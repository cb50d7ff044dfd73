"""The monitoring-plugins conventions: ranges as the guidelines define them, the threshold
expressions of `probe --nagios`, perfdata and the status line."""

from __future__ import annotations

import math
import re

import pytest

from workers.engine.errors import ErrorClass
from workers.engine.metrics import ClientError, ClientResult
from workers.engine.nagios import judge_run, parse_probe_thresholds, shown_url
from workers.engine.params import RunParams
from workers.engine.plugin import (
    BadThreshold,
    Perf,
    State,
    Thresholds,
    parse_range,
    status_line,
)
from workers.engine.results import RunResult

# The guidelines' own table: range, then values that alert and values that do not.
GUIDELINE_RANGES = [
    ("10", [-1, 10.1, 11], [0, 5, 10]),  # < 0 or > 10
    ("10:", [-1, 9.99], [10, 11, 1e9]),  # < 10
    ("~:10", [10.01, 11], [-1e9, -1, 10]),  # > 10
    ("10:20", [9, 20.5], [10, 15, 20]),  # < 10 or > 20
    ("@10:20", [10, 15, 20], [9.99, 20.01]),  # >= 10 and <= 20
    (":10", [-1, 11], [0, 10]),  # an empty start is 0 (as the C library reads it)
    ("@~:0", [-5, 0], [0.1]),
]


@pytest.mark.parametrize(("text", "alerting", "quiet"), GUIDELINE_RANGES)
def test_ranges_alert_as_the_guidelines_define_them(
    text: str, alerting: list[float], quiet: list[float]
) -> None:
    bound = parse_range(text, flag="--warning")
    assert [v for v in alerting if bound.alerts(v)] == alerting
    assert [v for v in quiet if bound.alerts(v)] == []


@pytest.mark.parametrize("text", ["", "abc", "20:10", "10:~", "@", "1:2:3", "1e3", "5%", "~"])
def test_a_malformed_range_names_the_flag(text: str) -> None:
    with pytest.raises(BadThreshold) as raised:
        parse_range(text, flag="--critical")
    assert raised.value.flag == "--critical"
    assert repr(text) in raised.value.message


def test_an_expression_names_several_metrics_and_a_bare_range_is_throughputs() -> None:
    found = parse_probe_thresholds("50:,open_time=~:0.5,availability=99:", "availability=90:")
    assert found["throughput_mbps"].warning == parse_range("50:", flag="x")
    assert found["open_s"].warning is not None and found["open_s"].warning.end == 0.5
    assert found["availability"].critical is not None
    assert found["availability"].critical.start == 90
    assert found["open_s"].critical is None


@pytest.mark.parametrize(
    ("warning", "critical", "flag", "said"),
    [
        ("speed=5", None, "--warning", "unknown metric 'speed'"),
        ("throughput=5,throughput_mbps=6", None, "--warning", "given twice"),
        (None, "open_s=~:x", "--critical", "is not a range"),
        (None, "open_s=1,,", "--critical", "empty item"),
    ],
)
def test_a_bad_expression_is_refused_naming_the_flag(
    warning: str | None, critical: str | None, flag: str, said: str
) -> None:
    with pytest.raises(BadThreshold) as raised:
        parse_probe_thresholds(warning, critical)
    assert raised.value.flag == flag
    assert said in raised.value.message


def test_an_empty_expression_sets_no_threshold() -> None:
    assert parse_probe_thresholds("", "") == {}


def test_critical_wins_over_warning() -> None:
    bounds = Thresholds(warning=parse_range("50:", flag="w"), critical=parse_range("10:", flag="c"))
    assert bounds.state(60) is State.OK
    assert bounds.state(30) is State.WARNING
    assert bounds.state(5) is State.CRITICAL


# The guidelines' perfdata grammar, 'label'=value[UOM];[warn];[crit];[min];[max], with their
# units and range syntax: written from the guidelines, not from our formatter.
RANGE_RE = r"@?(?:(?:~|-?[0-9.]+)?:)?(?:-?[0-9.]+)?"
PERF_RE = re.compile(
    rf"^(?:'[^'=]+'|[^'= ]+)=-?[0-9.]+(?:s|ms|us|%|B|KB|MB|TB|c)?"
    rf"(?:;(?:{RANGE_RE})(?:;(?:{RANGE_RE})(?:;(?:-?[0-9.]+)?(?:;(?:-?[0-9.]+)?)?)?)?)?$"
)
STATUS_RE = re.compile(r"^[A-Z_]+ (OK|WARNING|CRITICAL|UNKNOWN): [^|\n]+(?: \| (.+))?$")


def check_plugin_line(line: str) -> tuple[str, list[str]]:
    """A status line as the guidelines want it: (state, perfdata items)."""
    assert "\n" not in line.rstrip("\n"), line
    found = STATUS_RE.match(line.rstrip("\n"))
    assert found, line
    items = found[2].split(" ") if found[2] else []
    for item in items:
        assert PERF_RE.match(item), item
    return found[1], items


def test_perfdata_follows_the_grammar_and_writes_no_exponent() -> None:
    bounds = Thresholds(
        warning=parse_range("~:0.5", flag="w"), critical=parse_range("@1:2", flag="c")
    )
    perf = [
        Perf("open_s", 0.0000123, "s", bounds, 0.0),
        Perf("throughput_mbps", 1234567.891, "", Thresholds(), 0.0),
        Perf("availability", 100.0, "%", minimum=0.0, maximum=100.0),
        Perf("bytes_read", 4194304, "B", minimum=0.0),
    ]
    line = status_line("FEDPROBE", State.WARNING, "slow | odd\nmessage", perf)
    state, items = check_plugin_line(line)
    assert state == "WARNING"
    assert items[0] == "'open_s'=0.000012s;~:0.5;@1:2;0"
    assert items[1] == "'throughput_mbps'=1234567.891;;;0"
    assert items[2] == "'availability'=100%;;;0;100"
    assert "slow / odd message" in line


def test_infinite_ends_are_written_as_the_syntax_has_them() -> None:
    assert parse_range("~:10", flag="w").start == -math.inf
    assert parse_range("10:", flag="w").end == math.inf


def test_the_shown_url_carries_no_user_info_or_query() -> None:
    shown = shown_url("https://alice:s3cret@se.example.org:8443/f?authz=tok#x")
    assert shown == "https://se.example.org:8443/f"


def run_of(*errors: ErrorClass | None, run_error: ErrorClass | None = None) -> RunResult:
    """A hand-built run of one client per entry (None: it succeeded, reading 1 MB in 1 s)."""
    result = RunResult(
        params=RunParams(urls=("root://se.example.org:1094//f",), clients=len(errors) or 1),
        started_at="2026-11-28T00:00:00+00:00",
        host="test",
        deadline_s=60.0,
        wall_s=1.0,
    )
    for n, error in enumerate(errors):
        client = ClientResult(client=n, open_s=0.01, wall_s=1.0)
        if error is None:
            client.bytes_read = 1_000_000
        else:
            client.error = ClientError(error, f"{error} happened", 0.5)
        result.clients.append(client)
    if run_error is not None:
        result.run_error = (run_error, "preflight failed")
    return result


@pytest.mark.parametrize(
    ("run", "state", "said"),
    [
        (run_of(None, ErrorClass.SHORT_READ), State.WARNING, "1 of 2 clients failed (first: short"),
        (run_of(ErrorClass.REFUSED), State.CRITICAL, "failed: refused: refused happened"),
        (run_of(ErrorClass.HARNESS), State.UNKNOWN, "the tester's fault: failed: harness"),
        (run_of(run_error=ErrorClass.EGRESS), State.UNKNOWN, "the tester's fault: failed: egress"),
    ],
)
def test_a_runs_failure_is_critical_unless_it_is_the_testers(
    run: RunResult, state: State, said: str
) -> None:
    verdict = judge_run(run, parse_probe_thresholds(None, None))
    assert verdict.state is state, verdict.line
    assert said in verdict.line
    check_plugin_line(verdict.line)


def test_a_partial_run_may_still_trip_critical_on_availability() -> None:
    thresholds = parse_probe_thresholds(None, "availability=100:")
    verdict = judge_run(run_of(None, ErrorClass.SHORT_READ), thresholds)
    assert verdict.state is State.CRITICAL
    assert "availability 50% is below 100" in verdict.line
    assert "'availability'=50%;;100:;0;100" in verdict.line
