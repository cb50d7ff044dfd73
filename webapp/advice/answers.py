"""Each question's answer from the samples of one endpoint and vantage point (docs/advice.md).

Each function returns the statements it can make from the samples, and none when they are
too thin: the selectors (selectors.py) then say so and suggest the campaign that would
collect what is missing. The model's prediction stands beside each measurement; where they
disagree by more than TOLERANCE, the statement says so.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from webapp.advice import bootstrap, model
from webapp.advice.crossings import crossings, percent
from webapp.advice.evidence import FAMILIES, Sample
from webapp.advice.link import SYNC_PATTERNS, busy_s, moved_bytes
from webapp.advice.model import Link
from webapp.advice.statements import Statement
from workers.engine.params import METADATA_OPERATIONS, TPC_OPERATIONS, Method, Operation, Pattern
from workers.engine.units import format_size

# How far a measurement may be from the model's prediction before the statement says they
# disagree (the 25%: the lab reproduces the papers within it).
TOLERANCE = 0.25
# A ratio of times (latency hiding, read-ahead) within this of 1 is no difference.
SAME = 0.1
# Reading more than this many times the bytes asked for is "moving bytes nobody needs".
WASTE = 1.5
PLATEAU = model.PLATEAU  # the knee's rule, shared with the model
# Said of a statement whose interval cannot be had: a group of one measurement.
ONE_MEASUREMENT = (
    " It rests on one measurement of each case, so it has no interval: more repetitions "
    "(or clients) would give it one."
)


@dataclass(frozen=True)
class Context:
    """Where the statements are about and when they are read."""

    endpoint_id: int
    vantage_point_id: int | None  # None: the local one, not made yet
    protocol: str
    now: datetime
    max_age: timedelta
    link: Link | None

    def statement(
        self, question: str, verdict: str, text: str, evidence: Iterable[Sample], **fields: Any
    ) -> Statement:
        runs = list(evidence)
        measured = max((s.finished_at for s in runs if s.finished_at), default=None)
        if runs and self.link is not None:
            # The link the model was given, so that a reader can redo its prediction.
            fields["scope"] = {**fields.get("scope", {}), "model_link": asdict(self.link)}
        return Statement(
            question=question,
            verdict=verdict,
            text=text,
            endpoint_id=self.endpoint_id,
            vantage_point_id=self.vantage_point_id,
            protocol=self.protocol,
            evidence=sorted(s.run_id for s in runs),
            measured_at=measured,
            stale=measured is not None and self.now - measured > self.max_age,
            **fields,
        )


def grouped(
    samples: Iterable[Sample], key: Callable[[Sample], Hashable]
) -> dict[Any, list[Sample]]:
    groups: dict[Any, list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[key(sample)].append(sample)
    return groups


def times(samples: Iterable[Sample]) -> list[float]:
    """Every client's time of the samples: the unit the bootstrap resamples."""
    return [t for s in samples for t in s.times]


def disagreement_text(measured: float, predicted: float | None, what: str, why: str) -> str:
    """The model's side of a statement: agreement, or a disagreement and what it suggests."""
    return model_words(measured, predicted, what, why)[0]


def model_words(
    measured: float, predicted: float | None, what: str, why: str
) -> tuple[str, bool | None]:
    """(the model's side of a statement, whether the model agrees with the runs: None
    without a prediction). One rule writes both, so that a page marking a disagreement
    and the sentence it shows never differ."""
    if predicted is None:
        return f"The model predicts no {what} here.", None
    gap = model.disagreement(measured, predicted)
    if gap <= TOLERANCE:
        text = f"The model predicts {_number(predicted)}: within {TOLERANCE:.0%} of the runs."
        return text, True
    text = (
        f"The model predicts {_number(predicted)}, {gap:.0%} away from the runs (more than "
        f"{TOLERANCE:.0%}): that disagreement is itself a finding about the site: {why}"
    )
    return text, False


def with_interval(
    text: str, groups: bootstrap.Groups, statistic: bootstrap.Statistic
) -> tuple[str, tuple[float, float] | None]:
    """(the sentence, the bootstrap interval): the sentence says so when a case was measured
    once and the interval cannot be had."""
    if bootstrap.too_few(groups):
        return text + ONE_MEASUREMENT, None
    return text, bootstrap.interval(groups, statistic)


def _number(value: float) -> str:
    return f"{value:.3g}"


# -- crossover -------------------------------------------------------------------------------


def crossover(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per pattern, read size and file size measured with both direct and copy at two
    fractions or more: where copying first becomes faster."""
    usable = [s for s in samples if s.method in (Method.DIRECT, Method.COPY) and not s.readahead]
    statements = []
    scopes = grouped(usable, lambda s: (s.pattern, s.read_size, s.file_size, s.clients))
    for (pattern, read_size, file_size, clients), group in sorted(scopes.items()):
        by = grouped(group, lambda s: (s.method, s.fraction))
        fractions = sorted(
            {f for m, f in by if m == Method.DIRECT} & {f for m, f in by if m == Method.COPY}
        )
        if len(fractions) < 2:
            continue
        scope = {
            "pattern": pattern,
            "read_size": read_size,
            "file_size": file_size,
            "clients": clients,
            "fractions": fractions,
        }
        direct = [times(by[Method.DIRECT, f]) for f in fractions]
        copy = [times(by[Method.COPY, f]) for f in fractions]
        evidence = [s for f in fractions for m in (Method.DIRECT, Method.COPY) for s in by[m, f]]
        statements.append(_crossover_statement(ctx, scope, direct, copy, evidence))
    return statements


def _crossover_statement(
    ctx: Context,
    scope: dict[str, Any],
    direct: list[list[float]],
    copy: list[list[float]],
    evidence: list[Sample],
) -> Statement:
    fractions: list[float] = scope["fractions"]
    n = len(fractions)

    means = [bootstrap.mean(t) for t in direct + copy]
    value = _crossover_of(fractions, means[:n], means[n:])
    gaps = [bootstrap.mean(d) - bootstrap.mean(c) for d, c in zip(direct, copy, strict=True)]
    reads = f"{format_size(scope['read_size'])} {scope['pattern']} reads"
    predicted = None
    if ctx.link is not None:
        predicted = model.crossover_fraction(
            ctx.link, file_size=scope["file_size"], read_size=scope["read_size"]
        )
    verdict, text, direction = _crossover_words(fractions, gaps, value, reads)
    scope["copy_above"] = direction
    interval = None
    if verdict == "crossover":
        text, interval = with_interval(text, direct + copy, _crossovers(fractions))
    model_text, agrees = _crossover_model_text(verdict, value, predicted, fractions)
    if ctx.link is None:
        agrees = None
    return ctx.statement(
        "crossover",
        verdict,
        text,
        evidence,
        scope=scope,
        value=value,
        unit="fraction",
        interval=interval,
        model_prediction=predicted,
        model_text=model_text,
        model_agrees=agrees,
    )


def _crossovers(fractions: Sequence[float]) -> bootstrap.Statistic:
    """_crossover_of of every resample at once: the direct means are the first n rows, the
    copy means the next n. A resample with a tie (a gap of exactly zero, which the shared
    reading of crossings skips) is read one by one."""
    n = len(fractions)
    at = np.asarray(fractions, dtype=float)

    def statistic(means: bootstrap.Means) -> bootstrap.Means:
        gaps = means[:n] - means[n:]
        faster = gaps > 0
        changes = faster[1:] != faster[:-1]
        i = changes.argmax(axis=0)
        columns = np.arange(gaps.shape[1])
        low, high = gaps[i, columns], gaps[np.minimum(i + 1, n - 1), columns]
        with np.errstate(divide="ignore", invalid="ignore"):
            crossed = at[i] + (at[np.minimum(i + 1, n - 1)] - at[i]) * -low / (high - low)
        edge = np.where(gaps[0] > 0, at[0], at[-1])
        values = np.where(changes.any(axis=0), crossed, edge)
        tied = (gaps == 0).any(axis=0)
        if tied.any():
            values[tied] = bootstrap.per_column(lambda m: _crossover_of(fractions, m[:n], m[n:]))(
                means[:, tied]
            )
        return values

    return statistic


WHY_CROSSOVER = (
    "reads cost more (or less) than a round trip each, or a copy more (or less) than the link "
    "rate says: a per-request overhead, a cache or read-ahead in between."
)


def _crossover_model_text(
    verdict: str, value: float | None, predicted: float | None, fractions: list[float]
) -> tuple[str, bool | None]:
    """The model beside the runs, and whether it agrees: a crossover against the predicted
    one; one method faster throughout agrees with a prediction beyond the measured range on
    its side."""
    if verdict == "crossover" and value is not None:
        return model_words(value, predicted, "crossover up to the whole file", WHY_CROSSOVER)
    beyond = {
        "read-directly": predicted is None or predicted > fractions[-1],
        "copy-first": predicted is not None and predicted < fractions[0],
    }
    said = "no crossover" if predicted is None else f"a crossover at {percent(predicted)}"
    if beyond.get(verdict, True):
        return f"The model predicts {said}: it agrees with the runs.", True
    text = (
        f"The model predicts {said}, inside the measured range where the runs find none: "
        f"that disagreement is itself a finding about the site: {WHY_CROSSOVER}"
    )
    return text, False


def _crossover_of(
    fractions: Sequence[float], direct: Sequence[float], copy: Sequence[float]
) -> float | None:
    """The first fraction where copying first and reading directly swap; at the measured
    range's edge when one of them is faster throughout (so that a resample without a
    crossing still counts, at the bound it says the crossover lies beyond)."""
    gaps = [d - c for d, c in zip(direct, copy, strict=True)]
    found = crossings(fractions, gaps)
    if found:
        return found[0][0]
    untied = [g for g in gaps if g]
    if not untied:
        return None
    return fractions[0] if untied[0] > 0 else fractions[-1]


def _crossover_words(
    fractions: list[float], gaps: list[float], value: float | None, reads: str
) -> tuple[str, str, bool | None]:
    """(verdict, the sentence, whether copying first is faster above the crossover)."""
    span = f"{percent(fractions[0])}-{percent(fractions[-1])}"
    found = crossings(fractions, gaps)
    if found:
        x, rising = found[0]
        if rising:
            text = (
                f"Copy the file first when reading more than {percent(x)} of it in {reads}; "
                "below that, read it directly."
            )
        else:
            text = (
                f"Read the file directly when reading more than {percent(x)} of it in {reads}; "
                "below that, copy it first."
            )
        return "crossover", text, rising
    untied = [g for g in gaps if g]
    if not untied:
        return "no-difference", f"Reading directly and copying first take as long ({span}).", None
    if untied[0] > 0:
        text = f"Copy the file first for {reads}: faster at every measured fraction ({span})."
        return "copy-first", text, True
    text = f"Read the file directly in {reads}: faster at every measured fraction ({span})."
    return "read-directly", text, False


def choice_at(statement: Statement, fraction: float) -> str | None:
    """What a crossover statement advises at `fraction` of the file: "copy-first" or
    "read-directly" (None for another question or no difference)."""
    if statement.question != "crossover" or not statement.enough_data:
        return None
    if statement.verdict in ("copy-first", "read-directly"):
        return statement.verdict
    above = statement.scope.get("copy_above")
    if statement.value is None or above is None:
        return None
    copy = (fraction > statement.value) == above
    return "copy-first" if copy else "read-directly"


# -- knee ------------------------------------------------------------------------------------

# The operations a client sweep finds a knee of beyond reads: a write's bytes written per
# second, a metadata storm's operations per second (a copy's rate is its own question's).
KNEE_OPERATIONS = (Operation.WRITE, Operation.STAT, Operation.OPEN, Operation.LIST)


@dataclass(frozen=True)
class KneeWords:
    """How a knee statement names what stops scaling, in the operation's words: the
    sentences of each verdict, given the rates already written out."""

    knee: str  # {at}, {rate}, {each}
    scales: str  # {last}, {rate}
    flat: str  # {rate}, {last}, {last_each}


READ_WORDS = KneeWords(
    knee="The aggregate rate stops growing at {at} clients ({rate}, {each} per client): more "
    "clients only share it.",
    scales="The aggregate rate still grows at {last} clients ({rate}): no knee yet.",
    flat="One client already gets the whole rate ({rate}): more clients share it, {last} "
    "clients get {last_each} each.",
)
WRITE_WORDS = KneeWords(
    knee="Writes stop scaling at {at} clients ({rate} written, {each} per client): more "
    "clients only share it.",
    scales="Writes still scale at {last} clients ({rate} written): no knee yet.",
    flat="One client already writes at the whole rate ({rate}): more clients share it, "
    "{last} clients write {last_each} each.",
)


def _storm_words(operation: str) -> KneeWords:
    return KneeWords(
        knee=f"The {operation} rate flattens at {{at}} clients ({{rate}}, {{each}} per "
        "client): more clients only wait longer for each operation.",
        scales=f"The {operation} rate still grows at {{last}} clients ({{rate}}): no knee yet.",
        flat=f"One client already gets the whole {operation} rate ({{rate}}): more clients "
        "share it, {last} clients get {last_each} each.",
    )


def _mbit(bps: float) -> str:
    return f"{bps * 8 / 1e6:.3g} Mbit/s"


def _ops(per_s: float) -> str:
    """Operations per second, whole ones from 100 on ("2,500 ops/s")."""
    return f"{per_s:,.0f} ops/s" if per_s >= 100 else f"{per_s:.3g} ops/s"


def knee(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per method, pattern, read size and fraction measured at three client counts or more:
    where the aggregate rate stops growing (reads: `samples` are read runs)."""
    statements = []
    scopes = grouped(
        [s for s in samples if not s.readahead],
        lambda s: (s.method, s.pattern, s.read_size, s.fraction, s.file_size),
    )
    for (method, pattern, read_size, fraction, file_size), group in sorted(scopes.items()):
        by = grouped(group, lambda s: s.clients)
        counts = sorted(by)
        if len(counts) < 3:
            continue
        rates = [[moved_bytes(s) / s.wall_s for s in by[n]] for n in counts]
        scope = {
            "operation": str(Operation.READ),
            "method": method,
            "pattern": pattern,
            "read_size": read_size,
            "fraction": fraction,
            "file_size": file_size,
            "clients": counts,
        }
        statements.append(_knee_statement(ctx, scope, counts, rates, group))
    return statements


def operation_knees(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """The knee of writes (bytes written per second, per request and file size) and of
    metadata storms (operations per second, per operation and target rate) measured at
    three client counts or more: where they stop scaling. `samples`: runs of other
    operations than reads (the others are left out)."""
    statements = []
    writes = [s for s in samples if s.operation == Operation.WRITE and s.throughput_mbps]
    for (read_size, write_size), group in sorted(
        grouped(writes, lambda s: (s.read_size, s.write_size)).items()
    ):
        scope = {"operation": str(Operation.WRITE), "read_size": read_size, "file_size": write_size}
        statements += _operation_knee(
            ctx, scope, group, rate_of=_written_bps, words=WRITE_WORDS, shown=_mbit
        )
    storms = [s for s in samples if s.operation in METADATA_OPERATIONS and s.ops_per_s]
    for (operation, rate), group in sorted(
        grouped(storms, lambda s: (s.operation, s.rate)).items()
    ):
        scope = {"operation": operation, "rate": rate}
        words = _storm_words(operation)
        statements += _operation_knee(
            ctx, scope, group, rate_of=lambda s: s.ops_per_s or 0.0, words=words, shown=_ops
        )
    return statements


def _operation_knee(
    ctx: Context,
    scope: dict[str, Any],
    group: list[Sample],
    *,
    rate_of: Callable[[Sample], float],
    words: KneeWords,
    shown: Callable[[float], str],
) -> list[Statement]:
    by = grouped(group, lambda s: s.clients)
    counts = sorted(by)
    if len(counts) < 3:
        return []
    rates = [[rate_of(s) for s in by[n]] for n in counts]
    scope["clients"] = counts
    return [_knee_statement(ctx, scope, counts, rates, group, words=words, shown=shown)]


def _written_bps(sample: Sample) -> float:
    """A write's rate: its bytes written over its writing span (the run's throughput)."""
    return (sample.throughput_mbps or 0.0) * 1e6


def _knee_of(counts: Sequence[int], means: Sequence[float]) -> float:
    """The first client count whose aggregate rate reaches PLATEAU of the highest."""
    top = max(means)
    return float(next(n for n, rate in zip(counts, means, strict=True) if rate >= PLATEAU * top))


def _knee_statement(
    ctx: Context,
    scope: dict[str, Any],
    counts: list[int],
    rates: list[list[float]],
    evidence: list[Sample],
    *,
    words: KneeWords = READ_WORDS,
    shown: Callable[[float], str] = _mbit,
) -> Statement:
    means = [bootstrap.mean(r) for r in rates]
    at = _knee_of(counts, means)
    index = counts.index(int(at))
    per_client = means[index] / at
    aggregate = means[index]
    reads = scope["operation"] == Operation.READ
    # A read's or a write's rates are bytes/s, a storm's operations/s.
    unit = "bps" if reads or scope["operation"] == Operation.WRITE else "ops_per_s"
    scope[f"per_client_{unit}"] = per_client
    scope[f"aggregate_{unit}"] = aggregate
    scope[f"rates_{unit}"] = means
    said = {
        "at": int(at),
        "rate": shown(aggregate),
        "each": shown(per_client),
        "last": counts[-1],
        "last_each": shown(means[-1] / counts[-1]),
    }
    if index == len(counts) - 1:
        verdict, text = "scales", words.scales.format(**said)
    elif index == 0:
        verdict, text = "flat", words.flat.format(**said)
    else:
        verdict, text = "knee", words.knee.format(**said)
    predicted = None
    if ctx.link is not None and reads:
        # One client's rate, its session's round trips left out as the link's bandwidth is.
        fewest = [s for s in evidence if s.clients == counts[0]]
        busy = [
            moved_bytes(s) / t / s.clients for s in fewest if (t := busy_s(s, ctx.link.rtt_s)) > 0
        ]
        if busy:
            # Sync reads (one request in flight per client) wait for each other's bytes on
            # the link near the knee: the model's closed loop needs their size.
            sync = scope["method"] == Method.DIRECT and scope["pattern"] in SYNC_PATTERNS
            predicted = model.knee(
                ctx.link,
                per_client_bps=bootstrap.mean(busy),
                read_size=scope["read_size"] if sync else None,
            )
    text, interval = with_interval(text, rates, _knees(counts))
    if reads:
        model_text, agrees = model_words(
            at,
            predicted,
            "knee (the link is not the limit)",
            "the storage (disks, a server's threads) or the client host stops scaling before "
            "the link does, or each client gets less than alone.",
        )
    else:
        model_text, agrees = (
            f"The model predicts no knee of {scope['operation']} runs: it models reads over "
            "the link, not what the storage does to commit a file or answer its metadata.",
            None,
        )
    return ctx.statement(
        "knee",
        verdict,
        text,
        evidence,
        scope=scope,
        value=at,
        unit="clients",
        interval=interval,
        model_prediction=predicted,
        model_text=model_text,
        model_agrees=agrees,
    )


def _knees(counts: Sequence[int]) -> bootstrap.Statistic:
    """_knee_of of every resample at once (rows: the client counts' mean rates)."""
    at = np.asarray(counts, dtype=float)

    def statistic(means: bootstrap.Means) -> bootstrap.Means:
        reached = means >= PLATEAU * means.max(axis=0)
        return np.asarray(at[reached.argmax(axis=0)], dtype=float)

    return statistic


# -- latency hiding --------------------------------------------------------------------------


def latency_hiding(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per read size and fraction measured synchronously and with async or vector reads:
    how much faster the latter are at this round-trip time."""
    direct = [s for s in samples if s.method == Method.DIRECT and not s.readahead]
    scopes = grouped(direct, lambda s: (s.read_size, s.fraction, s.file_size, s.clients))
    statements = []
    for (read_size, fraction, file_size, clients), group in sorted(scopes.items()):
        sync = [s for s in group if s.pattern in SYNC_PATTERNS]
        for mode in (Pattern.ASYNC, Pattern.VECTOR):
            hidden = [s for s in group if s.pattern == mode]
            if not sync or not hidden:
                continue
            scope = {
                "mode": str(mode),
                "read_size": read_size,
                "fraction": fraction,
                "file_size": file_size,
                "clients": clients,
                "depth": hidden[-1].depth,
                "vector_size": hidden[-1].vector_size,
            }
            statements.append(_hiding_statement(ctx, scope, sync, hidden))
    return statements


def _hiding_statement(
    ctx: Context, scope: dict[str, Any], sync: list[Sample], hidden: list[Sample]
) -> Statement:
    groups = [times(sync), times(hidden)]
    speedup = bootstrap.mean(groups[0]) / bootstrap.mean(groups[1])
    mode = scope["mode"]
    reads = f"{format_size(scope['read_size'])} reads"
    if speedup >= 1 + SAME:
        verdict = "pays-off"
        text = f"{mode.capitalize()} {reads} are {speedup:.3g}x as fast as one at a time here."
    else:
        verdict = "no-gain"
        text = f"{mode.capitalize()} {reads} gain nothing over one at a time here ({speedup:.2g}x)."
    text, interval = with_interval(text, groups, _ratio)
    predicted = _predicted_speedup(ctx.link, scope)
    model_text, agrees = model_words(
        speedup,
        predicted,
        "speed-up",
        "the server answers requests in flight one by one (a per-request cost the round "
        "trip does not hide), or the link is fuller than the runs' rate suggests.",
    )
    return ctx.statement(
        "latency-hiding",
        verdict,
        text,
        sync + hidden,
        scope=scope,
        value=speedup,
        unit="x",
        interval=interval,
        model_prediction=predicted,
        model_text=model_text,
        model_agrees=agrees,
    )


def _ratio(means: bootstrap.Means) -> bootstrap.Means:
    return np.asarray(means[0] / means[1], dtype=float)


def _difference(means: bootstrap.Means) -> bootstrap.Means:
    return np.asarray(means[0] - means[1], dtype=float)


def _predicted_speedup(link: Link | None, scope: dict[str, Any]) -> float | None:
    if link is None:
        return None
    size, read_size = scope["file_size"], scope["read_size"]
    reads = model.reads_needed(file_size=size, read_size=read_size, fraction=scope["fraction"])
    session = model.SESSION_RTTS * link.rtt_s
    sync = session + reads / model.sync_rate(link, read_size=read_size)
    if scope["mode"] == Pattern.ASYNC:
        rate = model.async_rate(link, read_size=read_size, depth=scope["depth"])
    else:
        rate = model.vector_rate(link, read_size=read_size, chunks=scope["vector_size"])
    return sync / (session + reads / rate)


# -- read-ahead ------------------------------------------------------------------------------


def read_ahead(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per pattern, read size and fraction read with and without read-ahead: whether it
    makes reading faster, or only moves more bytes."""
    direct = [s for s in samples if s.method == Method.DIRECT and s.pattern in SYNC_PATTERNS]
    scopes = grouped(direct, lambda s: (s.pattern, s.read_size, s.fraction, s.file_size))
    statements = []
    for (pattern, read_size, fraction, file_size), group in sorted(scopes.items()):
        plain = [s for s in group if not s.readahead]
        ahead = [s for s in group if s.readahead]
        if not plain or not ahead:
            continue
        scope = {
            "pattern": pattern,
            "read_size": read_size,
            "fraction": fraction,
            "file_size": file_size,
            "readahead": ahead[-1].readahead,
        }
        statements.append(_readahead_statement(ctx, scope, plain, ahead))
    return statements


def _readahead_statement(
    ctx: Context, scope: dict[str, Any], plain: list[Sample], ahead: list[Sample]
) -> Statement:
    groups = [times(ahead), times(plain)]
    ratio = bootstrap.mean(groups[0]) / bootstrap.mean(groups[1])
    asked = sum(s.bytes_requested for s in ahead)
    moved = sum(s.bytes_wire for s in ahead)
    waste = moved / asked if asked else 1.0
    scope["bytes_wire_per_requested"] = waste
    what = f"read-ahead of {format_size(scope['readahead'])} on {scope['pattern']} reads"
    if ratio <= 1 - SAME:
        verdict = "helps"
        text = f"Use {what}: it takes {ratio:.0%} of the time."
    elif waste >= WASTE:
        verdict = "only-moves-bytes"
        text = (
            f"Turn off {what}: it is no faster ({ratio:.0%} of the time) and moves "
            f"{waste:.3g}x the bytes asked for."
        )
    else:
        verdict = "no-difference"
        text = f"{what.capitalize()} makes no difference ({ratio:.0%} of the time)."
    text, interval = with_interval(text, groups, _ratio)
    return ctx.statement(
        "read-ahead",
        verdict,
        text,
        plain + ahead,
        scope=scope,
        value=ratio,
        unit="time ratio",
        interval=interval,
        model_text="The model does not predict read-ahead: it depends on the pattern; the "
        "bytes it moved are measured (bytes_wire against bytes_requested).",
    )


# -- cache -----------------------------------------------------------------------------------


def cache(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """For a cache: the first run of each test file found it cold, the later ones warm
    (as far as fedprobe knows: a cache emptied in between is cold again). Per parameter set
    with both: what a miss costs."""
    first: dict[tuple[int, int], int] = {}
    for sample in samples:  # oldest first
        first.setdefault((sample.test_file_id, sample.vantage_point_id), sample.run_id)
    cold_ids = set(first.values())
    scopes = grouped(samples, lambda s: (s.method, s.pattern, s.read_size, s.fraction, s.file_size))
    statements = []
    for (method, pattern, read_size, fraction, file_size), group in sorted(scopes.items()):
        cold = [s for s in group if s.run_id in cold_ids]
        warm = [s for s in group if s.run_id not in cold_ids]
        if not cold or not warm:
            continue
        groups = [times(cold), times(warm)]
        cost = bootstrap.mean(groups[0]) - bootstrap.mean(groups[1])
        warm_s = bootstrap.mean(groups[1])
        helps = cost > SAME * warm_s
        text = (
            f"A miss costs {cost:.3g} s ({bootstrap.mean(groups[0]):.3g} s cold, "
            f"{warm_s:.3g} s warm) for {format_size(read_size)} {pattern} reads of "
            f"{percent(fraction)}."
        )
        if not helps:
            text += " Warm reads are no faster: the cache does not help here."
        text, interval = with_interval(text, groups, _difference)
        scope = {
            "method": method,
            "pattern": pattern,
            "read_size": read_size,
            "fraction": fraction,
            "file_size": file_size,
            "cold_s": bootstrap.mean(groups[0]),
            "warm_s": warm_s,
        }
        statements.append(
            ctx.statement(
                "cache",
                "helps" if helps else "no-gain",
                text,
                group,
                scope=scope,
                value=cost,
                unit="s",
                interval=interval,
                model_text="The model's miss costs a session with the origin and the bytes "
                "over its link; fedprobe does not know the cache's origin link, so it does "
                "not predict it.",
            )
        )
    return statements


# -- redirector ------------------------------------------------------------------------------


def redirector(
    samples: Sequence[Sample], servers: dict[int, list[Sample]], ctx: Context
) -> list[Statement]:
    """For a redirector: its open time against the data servers' it sent the runs to
    (`servers`: their samples from the same vantage point, by endpoint)."""
    opened = [s for s in samples if s.open_s is not None and s.method == Method.DIRECT]
    direct = [s for group in servers.values() for s in group if s.open_s is not None]
    direct = [s for s in direct if s.method == Method.DIRECT]
    if not opened or not direct:
        return []
    groups = [[s.open_s for s in opened if s.open_s], [s.open_s for s in direct if s.open_s]]
    if not groups[0] or not groups[1]:
        return []
    cost = bootstrap.mean(groups[0]) - bootstrap.mean(groups[1])
    wall = statistics.median(s.wall_s for s in opened)
    at = (
        f"{bootstrap.mean(groups[0]) * 1000:.3g} ms against "
        f"{bootstrap.mean(groups[1]) * 1000:.3g} ms at the data servers"
    )
    interval = None if bootstrap.too_few(groups) else bootstrap.interval(groups, _difference)
    measurable = cost > 0 and (interval is None or interval[0] > 0)
    if not measurable:
        # A cost the runs cannot tell from zero (or a "saving", which a redirection cannot
        # make: the data servers' opens were slower for other reasons) is no cost.
        verdict = "no-difference"
        text = f"The redirection adds no measurable cost to each open ({at}"
        if interval is not None:
            text += f"; the difference's 95% interval is {_ms(interval[0])} to {_ms(interval[1])}"
        text += ")."
    else:
        verdict = "costly" if cost > SAME * wall else "cheap"
        text = f"The redirection adds {cost * 1000:.3g} ms to each open ({at})"
        text += (
            ": a large share of a run, go to the data server directly where you can."
            if verdict == "costly"
            else "."
        )
    if bootstrap.too_few(groups):
        text += ONE_MEASUREMENT
    predicted = model.redirection_s(ctx.link) if ctx.link is not None else None
    model_text, agrees = model_words(
        max(cost, 0.0),
        predicted,
        "redirection cost",
        "the redirector takes its time to locate the file (asks its servers), or keeps "
        "sessions open so that a redirection costs less than a new session.",
    )
    return [
        ctx.statement(
            "redirector",
            verdict,
            text,
            opened + direct,
            scope={"data_servers": sorted(servers)},
            value=max(cost, 0.0),  # no measurable cost: none, the interval says how sure
            unit="s",
            interval=interval,
            model_prediction=predicted,
            model_text=model_text,
            model_agrees=agrees,
        )
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"


# -- beyond reads: a copy's direction, the address family ------------------------------------


def _slower(ratio: float, interval: tuple[float, float] | None) -> int:
    """Whether a ratio of times (first / second) says the first is slower (1), faster (-1)
    or neither (0): by more than SAME, and with an interval that leaves out 1 when there is
    one (a difference the runs cannot tell from none is none)."""
    if ratio >= 1 + SAME and (interval is None or interval[0] > 1):
        return 1
    if ratio <= 1 / (1 + SAME) and (interval is None or interval[1] < 1):
        return -1
    return 0


def tpc_direction(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per destination, file size and client count copied both ways (tpc-pull: the
    destination pulls; tpc-push: the source pushes): which is faster, and how long each
    takes to start (to its first perf marker). The endpoint is the copies' source."""
    copies = [
        s
        for s in samples
        if s.operation in TPC_OPERATIONS and s.destination_endpoint_id is not None
    ]
    scopes = grouped(copies, lambda s: (s.destination_endpoint_id, s.file_size, s.clients, s.files))
    statements = []
    for (destination, file_size, clients, files), group in sorted(scopes.items()):
        pull = [s for s in group if s.operation == Operation.TPC_PULL]
        push = [s for s in group if s.operation == Operation.TPC_PUSH]
        if not pull or not push:
            continue
        scope = {
            "destination": destination,
            "file_size": file_size,
            "clients": clients,
            "files": files,
        }
        statements.append(_tpc_statement(ctx, scope, pull, push))
    return statements


def _tpc_statement(
    ctx: Context, scope: dict[str, Any], pull: list[Sample], push: list[Sample]
) -> Statement:
    groups = [[t for s in pull for t in s.copy_times], [t for s in push for t in s.copy_times]]
    pull_s, push_s = bootstrap.mean(groups[0]), bootstrap.mean(groups[1])
    ratio = pull_s / push_s
    starts = {}
    for name, runs in (("pull", pull), ("push", push)):
        found = [t for s in runs for t in s.client_starts]
        starts[name] = bootstrap.mean(found) if found else None
    scope |= {
        "pull_s": pull_s,
        "push_s": push_s,
        "pull_start_s": starts["pull"],
        "push_start_s": starts["push"],
    }
    interval = None if bootstrap.too_few(groups) else bootstrap.interval(groups, _ratio)
    copies = f"{format_size(scope['file_size'])} copies"
    times_said = f"{pull_s:.3g} s pulled against {push_s:.3g} s pushed"
    if starts["pull"] is not None and starts["push"] is not None:
        times_said += (
            f"; the first perf marker after {starts['pull']:.3g} s pulled, "
            f"{starts['push']:.3g} s pushed"
        )
    slower = _slower(ratio, interval)
    if slower < 0:
        verdict = "pull-faster"
        text = (
            f"Let the destination pull: {copies} pulled take {ratio:.0%} of the time pushed "
            f"({times_said})."
        )
    elif slower > 0:
        verdict = "push-faster"
        text = (
            f"Let the source push: {copies} pushed take {1 / ratio:.0%} of the time pulled "
            f"({times_said})."
        )
    else:
        verdict = "no-difference"
        text = f"Pulling and pushing {copies} take as long ({times_said})."
    if bootstrap.too_few(groups):
        text += ONE_MEASUREMENT
    return ctx.statement(
        "tpc-direction",
        verdict,
        text,
        pull + push,
        scope=scope,
        value=ratio,
        unit="time ratio",
        interval=interval,
        model_text="The model does not predict third-party copies: the two storages "
        "copy between themselves, over a link fedprobe does not see.",
    )


# What makes two runs the same but for their address family.
_SAME_RUN = (
    "operation",
    "method",
    "pattern",
    "read_size",
    "fraction",
    "clients",
    "file_size",
    "write_size",
    "readahead",
    "rate",
    "destination_endpoint_id",
)


def address_family(samples: Sequence[Sample], ctx: Context) -> list[Statement]:
    """Per parameter set measured over IPv4 and over IPv6 (the family each run actually went
    over, `address_family`): whether one is slower. `samples`: runs of every operation."""
    known = [s for s in samples if s.address_family in FAMILIES]
    scopes = grouped(known, lambda s: tuple(getattr(s, name) for name in _SAME_RUN))
    statements = []
    for key, group in sorted(scopes.items(), key=lambda item: [str(v) for v in item[0]]):
        ipv4 = [s for s in group if s.address_family == FAMILIES[0]]
        ipv6 = [s for s in group if s.address_family == FAMILIES[1]]
        if not ipv4 or not ipv6:
            continue
        scope = dict(zip(_SAME_RUN, key, strict=True))
        scope["destination"] = scope.pop("destination_endpoint_id")
        statements.append(_family_statement(ctx, scope, ipv4, ipv6))
    return statements


def _family_statement(
    ctx: Context, scope: dict[str, Any], ipv4: list[Sample], ipv6: list[Sample]
) -> Statement:
    groups = [times(ipv6), times(ipv4)]
    ipv6_s, ipv4_s = bootstrap.mean(groups[0]), bootstrap.mean(groups[1])
    ratio = ipv6_s / ipv4_s
    scope |= {"ipv4_s": ipv4_s, "ipv6_s": ipv6_s}
    interval = None if bootstrap.too_few(groups) else bootstrap.interval(groups, _ratio)
    what = _runs_named(scope)
    said = f"{ipv6_s:.3g} s over IPv6 against {ipv4_s:.3g} s over IPv4"
    slower = _slower(ratio, interval)
    if slower > 0:
        verdict = "ipv6-slower"
        text = f"IPv6 is slower for {what}: {ratio:.3g}x the time ({said})."
    elif slower < 0:
        verdict = "ipv4-slower"
        text = f"IPv4 is slower for {what}: {1 / ratio:.3g}x the time ({said})."
    else:
        verdict = "no-difference"
        text = f"IPv4 and IPv6 take as long for {what} ({said})."
    if bootstrap.too_few(groups):
        text += ONE_MEASUREMENT
    return ctx.statement(
        "address-family",
        verdict,
        text,
        ipv4 + ipv6,
        scope=scope,
        value=ratio,
        unit="x",
        interval=interval,
        model_text="The model does not predict a family's cost: it takes both over one link.",
    )


def _runs_named(scope: dict[str, Any]) -> str:
    """The runs a family statement is about, in a few words."""
    operation = scope["operation"]
    clients = f"{scope['clients']} client{'s' if scope['clients'] != 1 else ''}"
    if operation == Operation.READ:
        return (
            f"{format_size(scope['read_size'])} {scope['pattern']} reads of "
            f"{percent(scope['fraction'])} ({scope['method']}, {clients})"
        )
    if operation == Operation.WRITE:
        return f"writes of {format_size(scope['write_size'])} ({clients})"
    if operation in TPC_OPERATIONS:
        return f"{operation} copies of {format_size(scope['file_size'])} ({clients})"
    return f"{operation} runs ({clients})"
