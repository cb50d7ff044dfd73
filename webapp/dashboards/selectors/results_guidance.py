"""What the campaign results page says about its charts, computed from what the campaign asked
for and what its runs measured: why a chart cannot be drawn (and what to do about it), and in
which order the latency-hiding chart puts the endpoints.

A chart needs a parameter measured at two values or more. When the campaign asks for two or
more, the advice says why they are not there yet (runs still to come) or not at all (their
runs failed or were cancelled); only when it asks for one does it say what to add.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from webapp.campaigns.models import Campaign
from webapp.campaigns.selectors import percentile
from workers.engine.params import Method, Operation
from workers.engine.units import format_size

# The parameters charts are drawn across (the time to read against fraction and read size;
# throughput and open time against clients): the campaign field that asks for its values,
# their name in a sentence, and for one of them, and what adding values draws.
NEEDS = {
    "fraction": (
        "fractions",
        "fractions of the file",
        "one fraction of the file",
        "add fractions (e.g. 0.1, 0.25, 0.5, 0.75, 1) to draw the time to read against them",
    ),
    "read_size": (
        "read_sizes",
        "read sizes",
        "one read size",
        "add read sizes (e.g. 1k, 64k, 1M) to draw the time to read against them",
    ),
    "clients": (
        "clients",
        "client counts",
        "one client count",
        "add client counts (e.g. 1, 4, 16) to see how throughput and open time change with them",
    ),
}
# The methods a crossover is found between.
CROSSOVER_METHODS = (Method.DIRECT, Method.COPY)
# The papers behind a chart, for the sentences that point to them.
FURANO_HANUSHEVSKY = "Furano & Hanushevsky (2008)"


def _shown(name: str, value: Any) -> str:
    if name == "fraction":
        return f"{value * 100:g}%"
    if name == "read_size":
        return format_size(value)
    return str(value)


def _listed(name: str, values: Iterable[Any]) -> str:
    return ", ".join(_shown(name, v) for v in sorted(values))


def still_to_come(active_runs: int) -> str:
    return f"{active_runs} run{'s' if active_runs != 1 else ''} still to come"


def _not_measured(*, active_runs: int, what: str, missing: str) -> str:
    """Why values the campaign asks for have no measured runs, and what to do."""
    if active_runs:
        return (
            f"{still_to_come(active_runs)} (queued or running): {what} {missing} not measured "
            "yet. Reload when they end."
        )
    return (
        f"No run measured {what} {missing}, which the campaign asks for: their runs failed, "
        "timed out or were cancelled (see Errors), or fall outside the days read. Launch the "
        "campaign again to measure them."
    )


def value_advice(
    *, name: str, campaign: Campaign, measured: Sequence[Any], active_runs: int
) -> str | None:
    """Why the charts drawn across parameter `name` cannot be drawn, or None if they can."""
    field, plural, one, add = NEEDS[name]
    if len(set(measured)) >= 2:
        return None
    asked = set(getattr(campaign, field) or [])
    if len(asked) >= 2:
        missing = _listed(name, asked - set(measured))
        return _not_measured(active_runs=active_runs, what=plural, missing=missing)
    return f"This campaign measures {one}: {add}."


def methods_advice(*, campaign: Campaign, measured: Iterable[str], active_runs: int) -> str | None:
    """Why no crossover of direct and copy can be found, or None if one can be looked for."""
    missing = set(CROSSOVER_METHODS) - set(measured)
    if not missing:
        return None
    if set(CROSSOVER_METHODS) <= set(campaign.methods or []):
        return _not_measured(
            active_runs=active_runs, what="method", missing=" and ".join(sorted(missing))
        )
    return (
        "Add methods direct and copy to the campaign to find where copying the file first "
        "becomes faster than reading it directly."
    )


def variant(cell: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two ways of reading apart on the latency-hiding chart (the page's
    `variant`): the pattern with its depth or vector size, the read-ahead, the streams."""
    pattern = cell["pattern"]
    extra = {"async": cell["depth"], "vector": cell["vector_size"]}.get(pattern, 0)
    return (pattern, extra, cell["readahead"], cell["streams"])


def latency_advice(
    *, campaign: Campaign, cells: Sequence[dict[str, Any]], active_runs: int
) -> str | None:
    """Why the latency-hiding chart has nothing to compare, or None if it has."""
    if len({variant(c) for c in cells if c["wall_s"] is not None}) >= 2:
        return None
    asked = set(campaign.patterns or [])
    measured = {c["pattern"] for c in cells if c["wall_s"] is not None}
    if len(asked) >= 2:
        missing = ", ".join(sorted(asked - measured)) or "the other ways"
        return _not_measured(active_runs=active_runs, what="patterns", missing=missing)
    return (
        "This campaign reads with one access pattern: add patterns random, async and vector "
        f"(the synchronous, asynchronous and vectored reads of {FURANO_HANUSHEVSKY}) to "
        "compare them; a campaign with a read-ahead adds read-ahead bars."
    )


def results_guidance(
    *, campaign: Campaign, cells: Sequence[dict[str, Any]], active_runs: int
) -> dict[str, str | None]:
    """Per parameter a chart is drawn across, `methods` (the crossover) and `latency` (the
    latency-hiding chart): the sentence that stands instead of the chart, or None."""
    guidance: dict[str, str | None] = {
        name: value_advice(
            name=name,
            campaign=campaign,
            measured=[c[name] for c in cells],
            active_runs=active_runs,
        )
        for name in NEEDS
    }
    guidance["methods"] = methods_advice(
        campaign=campaign, measured={c["method"] for c in cells}, active_runs=active_runs
    )
    guidance["latency"] = latency_advice(campaign=campaign, cells=cells, active_runs=active_runs)
    return guidance


def _median(values: Iterable[float | None]) -> float | None:
    ordered = sorted(v for v in values if v is not None)
    return percentile(ordered, 0.5) if ordered else None


def _in_order(
    ids: Sequence[int], key: dict[int, float | None], names: dict[int, str]
) -> list[int] | None:
    """`ids` by `key` (then name), or None if one of them has no value."""
    if any(key.get(i) is None for i in ids):
        return None
    return sorted(ids, key=lambda i: (key[i], names.get(i, "")))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"


def latency_order(
    *, cells: Sequence[dict[str, Any]], endpoint_names: dict[int, str]
) -> list[dict[str, Any]]:
    """Per vantage point, the endpoints in the order the latency-hiding chart draws them, and
    the sentence that says which order it is: by the round-trip time each run's preflight
    measured (median over its parameter sets), else by the time to first byte of the direct
    reads (copies wait for the whole file; a write's first byte is the server's
    acknowledgement), else by name."""
    by_place: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        if cell["wall_s"] is not None:
            by_place[cell["vantage_point"]][cell["endpoint"]].append(cell)
    orders = []
    for vantage_point in sorted(by_place):
        endpoints = by_place[vantage_point]
        ids = sorted(endpoints)
        orders.append({"vantage_point": vantage_point, **_order(ids, endpoints, endpoint_names)})
    return orders


def _order(
    ids: list[int], endpoints: dict[int, list[dict[str, Any]]], names: dict[int, str]
) -> dict[str, Any]:
    def name(i: int) -> str:
        return names.get(i, f"endpoint {i}")

    def listed(key: dict[int, float | None], order: list[int], show: Callable[..., str]) -> str:
        return ", ".join(f"{name(i)} {show(key[i])}" for i in order)

    rtt = {i: _median(c["preflight_rtt_ms"] for c in endpoints[i]) for i in ids}
    order = _in_order(ids, rtt, names)
    if order is not None:
        values = listed(rtt, order, lambda ms: _ms(ms / 1000))
        text = f"Endpoints in order of their round-trip time (measured before each run): {values}."
        return {"by": "rtt", "endpoints": order, "text": text}
    direct = [
        c
        for i in ids
        for c in endpoints[i]
        if c["method"] == Method.DIRECT and c["operation"] == Operation.READ
    ]
    ttfb = {i: _median(c["ttfb_s"] for c in direct if c["endpoint"] == i) for i in ids}
    order = _in_order(ids, ttfb, names)
    if order is not None:
        values = listed(ttfb, order, _ms)
        text = (
            "Endpoints in order of the median time to first byte of their direct reads (these "
            f"runs recorded no round-trip time): {values}."
        )
        return {"by": "direct-ttfb", "endpoints": order, "text": text}
    order = sorted(ids, key=name)
    text = (
        "Endpoints in name order: not every one has a round-trip time or a direct read to "
        "order them by."
    )
    return {"by": "name", "endpoints": order, "text": text}


# The results page's charts that answer one question each, by id, with their titles (the
# errors chart is always drawn).
CHART_TITLES = {
    "fraction": "Time to read vs fraction of the file read",
    "read-size": "Time to read vs read size",
    "throughput": "Throughput vs clients",
    "open": "Open time vs clients",
    "doors": "Open time and time to read per door",
    "bytes": "Bytes transferred vs bytes needed",
    "latency": "Latency hiding: sync, async, vector, read-ahead per endpoint",
}
# The methods that move more bytes than their readers ask for (the bytes chart's question).
MOVING_METHODS = (Method.COPY, Method.STAGE)


# The charts of the operations beyond reads, by id: their titles and the operations they
# draw (a campaign that runs one of them has the chart; the read charts draw reads only).
OPERATION_CHARTS = {
    "write": ("Write throughput vs clients", (Operation.WRITE,)),
    "metadata": (
        "Metadata operations per second vs clients",
        (Operation.STAT, Operation.OPEN, Operation.LIST),
    ),
    "tpc-rate": ("Copy rate vs clients: pull and push", (Operation.TPC_PULL, Operation.TPC_PUSH)),
    "tpc-start": (
        "Time to start a copy vs clients: pull and push",
        (Operation.TPC_PULL, Operation.TPC_PUSH),
    ),
    "replay": ("Replayed job's time per endpoint", (Operation.REPLAY,)),
}


def results_operations(*, campaign: Campaign, cells: Sequence[dict[str, Any]]) -> list[str]:
    """The operations the campaign asks for or its runs measured (a campaign edited since),
    in the engine's order."""
    named = set(campaign.operations or [Operation.READ]) | {c["operation"] for c in cells}
    return [str(o) for o in Operation if o in named]


def operation_charts(operations: Iterable[str]) -> list[str]:
    """The ids of the charts the operations beyond reads have, in the page's order."""
    ran = set(operations)
    return [chart for chart, (_, drawn) in OPERATION_CHARTS.items() if ran & set(drawn)]


def _said(words: Sequence[str]) -> str:
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _no_reads(operations: Sequence[str]) -> str:
    """Why a campaign of other operations has no read chart, and which charts answer it."""
    titles = [OPERATION_CHARTS[chart][0] for chart in operation_charts(operations)]
    return (
        f"this campaign runs {_said(list(operations))}, not reads: the page draws what it "
        f"measures in {_said(titles)}."
    )


def charts_not_asked(
    *,
    campaign: Campaign,
    cells: Sequence[dict[str, Any]],
    endpoints: int,
    operations: Sequence[str] = (Operation.READ,),
) -> dict[str, str]:
    """Per read chart of the results page whose question this campaign does not ask: the one
    line that says why it is not drawn. A chart is asked a question when the campaign asks for
    what it needs (two values of its parameter, copies or read-ahead, two patterns, two
    endpoints) or its runs measured it (a campaign edited since); an asked chart is drawn, or
    says why its runs do not answer it yet. `cells`: the read cells; `endpoints`: how many the
    campaign reads; `operations`: the campaign's (results_operations), without reads none of
    the read charts is asked, and the line says which charts answer it instead."""
    if Operation.READ not in operations:
        return {chart: _no_reads(operations) for chart in CHART_TITLES}
    measured = {name: {c[name] for c in cells} for name in ("fraction", "read_size", "clients")}
    reasons: dict[str, str] = {}
    for name, charts in (
        ("fraction", ("fraction",)),
        ("read_size", ("read-size",)),
        ("clients", ("throughput", "open")),
    ):
        field, _, one, add = NEEDS[name]
        if len(set(getattr(campaign, field) or [])) < 2 and len(measured[name]) < 2:
            verb = "runs" if name == "clients" else "reads"
            reasons.update({chart: f"this campaign {verb} {one}: {add}." for chart in charts})
    moving = set(MOVING_METHODS) & ({c["method"] for c in cells} | set(campaign.methods or []))
    if not moving and not campaign.readahead and not any(c["readahead"] for c in cells):
        reasons["bytes"] = (
            "this campaign only reads directly, without read-ahead: its reads move what they "
            "ask for. Add method copy or stage, or a read-ahead, to see what they move more."
        )
    if len(set(campaign.patterns or [])) < 2 and len({variant(c) for c in cells}) < 2:
        reasons["latency"] = (
            "this campaign reads with one access pattern: add patterns random, async and vector "
            f"(the synchronous, asynchronous and vectored reads of {FURANO_HANUSHEVSKY}) to "
            "compare them."
        )
    if endpoints < 2 and len({c["endpoint"] for c in cells}) < 2:
        reasons["doors"] = (
            "this campaign reads one endpoint: add the site's other doors (protocols, TLS, "
            "credentials) to set their open times side by side."
        )
    return {chart: reasons[chart] for chart in CHART_TITLES if chart in reasons}


def charts_not_drawn(not_asked: dict[str, str]) -> list[dict[str, str]]:
    """The page's list of the charts it leaves out: id, title and why, in the page's order;
    all of them for one reason (a campaign without reads) in one line, its ids spaced."""
    if len(not_asked) == len(CHART_TITLES) and len(set(not_asked.values())) == 1:
        (reason,) = set(not_asked.values())
        titles = "; ".join(CHART_TITLES[chart] for chart in not_asked)
        title = f"The read charts ({titles})"
        return [{"id": " ".join(not_asked), "title": title, "reason": reason}]
    return [
        {"id": chart, "title": CHART_TITLES[chart], "reason": reason}
        for chart, reason in not_asked.items()
    ]
