"""`probe --nagios`: one run judged as a monitoring plugin (docs/monitoring-probes.md).

The run's failure is the service's (CRITICAL); a fault of the tester's own (its harness, the
egress policy, its credential found bad before any request) says nothing of the service and
is UNKNOWN, as are bad arguments. The thresholds then judge throughput, open time and
availability.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from workers.engine.errors import CREDENTIAL_PHASE, TESTER_FAULT_CLASSES, ErrorClass
from workers.engine.plugin import (
    Perf,
    Range,
    State,
    Thresholds,
    merge_thresholds,
    parse_thresholds,
    status_line,
)
from workers.engine.results import RunResult, RunStatus

SERVICE = "FEDPROBE"

# The metrics thresholds apply to, by the run JSON's names, with the short names accepted too.
THROUGHPUT, OPEN, AVAILABILITY = "throughput_mbps", "open_s", "availability"
METRIC_NAMES = {
    THROUGHPUT: THROUGHPUT,
    "throughput": THROUGHPUT,
    OPEN: OPEN,
    "open_time": OPEN,
    AVAILABILITY: AVAILABILITY,
}


def parse_probe_thresholds(warning: str | None, critical: str | None) -> dict[str, Thresholds]:
    """--warning/--critical of `probe --nagios`; a bare range is throughput's (MB/s), an empty
    one none (a monitoring core's macro left empty). Raises BadThreshold naming the flag."""

    def ranges(text: str | None, flag: str) -> dict[str, Range]:
        if not text:
            return {}
        return parse_thresholds(text, flag=flag, metrics=METRIC_NAMES, default=THROUGHPUT)

    return merge_thresholds(ranges(warning, "--warning"), ranges(critical, "--critical"))


@dataclass(frozen=True)
class Verdict:
    state: State
    line: str


def unknown(text: str) -> Verdict:
    """The plugin could not judge the service (bad arguments, its own fault)."""
    return Verdict(State.UNKNOWN, status_line(SERVICE, State.UNKNOWN, text))


def judge_run(result: RunResult, thresholds: dict[str, Thresholds]) -> Verdict:
    """The state of the service this run measured, and the status line saying why."""
    run = result.to_json()
    clients = len(result.clients)
    values: dict[str, float | None] = {
        THROUGHPUT: float(run["throughput_mbps"]) if run["bytes_read"] else None,
        OPEN: run["open_s"],
        AVAILABILITY: 100.0 * int(run["clients_ok"]) / clients if clients else None,
    }
    perfdata = _perfdata(values, int(run["bytes_read"]), thresholds)
    where = shown_url(result.params.urls[0])
    failure = _failure(result)
    if failure is not None:
        state, why = failure
        return Verdict(state, status_line(SERVICE, state, f"{why} ({where})", perfdata))
    states = []
    reasons = []
    for name, value in values.items():
        bound = thresholds.get(name)
        if value is None or bound is None or bound.state(value) is State.OK:
            continue
        tripped = bound.tripped(value)
        assert tripped is not None
        states.append(bound.state(value))
        reasons.append(f"{_figure(name, value)} is {tripped.describe()}")
    state = max(states, default=State.OK)
    if result.status == RunStatus.PARTIAL:
        # Some clients failed: the service is not fully there, whatever the thresholds say.
        state = max(state, State.WARNING)
        reasons.insert(0, _errors_text(result))
    summary = ", ".join(_figure(n, v) for n, v in values.items() if v is not None)
    text = "; ".join([*reasons, f"{summary} ({where})"])
    return Verdict(state, status_line(SERVICE, state, text, perfdata))


def _failure(result: RunResult) -> tuple[State, str] | None:
    """A run that measured nothing of the service: CRITICAL with its error, or UNKNOWN when the
    tester is to blame (or the run was cancelled)."""
    if result.status == RunStatus.CANCELLED:
        return State.UNKNOWN, "the run was cancelled"
    if result.status not in (RunStatus.FAILED, RunStatus.TIMEOUT):
        return None
    errors = result.to_json()["errors"]
    first = errors[0] if errors else {"class": "harness", "message": "no client ran"}
    tester = result.run_error_phase == CREDENTIAL_PHASE or all(
        ErrorClass(e["class"]) in TESTER_FAULT_CLASSES for e in errors
    )
    why = f"{result.status}: {first['class']}: {first['message']}"
    if tester:
        return State.UNKNOWN, f"not measured, the tester's fault: {why}"
    return State.CRITICAL, why


def _errors_text(result: RunResult) -> str:
    failed = [c for c in result.clients if c.error is not None]
    first = failed[0].error
    assert first is not None
    return (
        f"{len(failed)} of {len(result.clients)} clients failed "
        f"(first: {first.error_class}: {first.message})"
    )


def _perfdata(
    values: dict[str, float | None], bytes_read: int, thresholds: dict[str, Thresholds]
) -> list[Perf]:
    """Throughput is a plain number (MB/s, 10^6 B/s): the guidelines have no unit for a rate,
    and Icinga would read "MB" as a size."""
    units = {THROUGHPUT: ("", None), OPEN: ("s", None), AVAILABILITY: ("%", 100.0)}
    perf = [
        Perf(name, value, unit, thresholds.get(name, Thresholds()), 0.0, maximum)
        for name, (unit, maximum) in units.items()
        if (value := values[name]) is not None
    ]
    perf.append(Perf("bytes_read", bytes_read, "B", minimum=0.0))
    return perf


def _figure(name: str, value: float) -> str:
    if name == THROUGHPUT:
        return f"throughput {value:.2f} MB/s"
    if name == OPEN:
        return f"open {value * 1000:.1f} ms"
    return f"availability {value:.0f}%"


def shown_url(url: str) -> str:
    """The URL as the status line may show it: no user info, query or fragment (a password or
    a token would be there)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
