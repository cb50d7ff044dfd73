"""The evidence archive: one zip a site admin can attach to a GGUS ticket (docs/evidence.md).

It holds a README that says what is wrong in one sentence and what else to look at, the
series as SVG and CSV, the failing runs with their clients' records, the other vantage
points' runs in the same window, and the commands to reproduce by hand. Nothing secret: every
message is redacted, URLs lose their user part and query, and as a last guard any text of
the endpoint's stored credential is cut out of every file before it is zipped.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import zipfile
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime
from typing import Any

from django.utils.html import escape

from webapp.campaigns.models import Run
from webapp.campaigns.run_table import without_secrets
from webapp.core.redact import HIDDEN
from webapp.core.units import format_size
from webapp.dashboards.reproduce import (
    CREDENTIAL_HELP,
    Command,
    credential_of,
    public_url,
    reproduce_commands,
)
from webapp.dashboards.selectors.evidence import (
    MAX_CLIENTS,
    MAX_FAILING,
    MAX_OTHER_RUNS,
    MAX_RUNS,
    Evidence,
    VantageOutcome,
    night_value,
)
from webapp.dashboards.svg_chart import Line, nights_svg
from webapp.sites.models import Endpoint

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A client record's keys left out of the archive: the latency histograms' buckets (the
# summary, latency_us, stays) are kilobytes per client and say nothing a ticket needs.
BULKY_RECORD_KEYS = ("latency_hist",)
# Secrets shorter than this are not searched for (a word of a PEM header is not a secret).
MIN_SECRET_CHARS = 12

FILES = (
    ("README.txt", "this file"),
    ("series.svg", "the series around the change, night by night (open it in a browser)"),
    ("series-nights.csv", "each night of the test from each vantage point (rolled up)"),
    ("series-runs.csv", "each run of the series over those nights, newest first"),
    ("failing-runs.csv", "the failing runs: error class and message"),
    ("failing-clients.csv", "each client of the failing runs: status, error, timings"),
    ("failing-runs.json", "the failing runs' results and client records, as fedprobe stores"),
    ("other-vantage-points.csv", "the same test from the other vantage points, same window"),
    ("reproduce.sh", "the commands to reproduce it by hand (no secret: set the variables)"),
)


def evidence_filename(evidence: Evidence) -> str:
    return f"fedprobe-evidence-{evidence.slug}.zip"


def evidence_zip(evidence: Evidence, *, page_url: str = "") -> bytes:
    """The archive: every file of FILES under one folder named like the archive."""
    folder = evidence_filename(evidence).removesuffix(".zip")
    files = evidence_files(evidence, page_url=page_url)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, _ in FILES:
            archive.writestr(f"{folder}/{name}", files[name])
    return out.getvalue()


def evidence_files(evidence: Evidence, *, page_url: str = "") -> dict[str, str]:
    """Each file's text, with the endpoint's stored credential cut out of all of them."""
    commands = reproduce_commands(evidence.run) if evidence.run else []
    files = {
        "README.txt": evidence_readme(evidence, commands=commands, page_url=page_url),
        "series.svg": evidence_svg(evidence),
        "series-nights.csv": _nights_csv(evidence),
        "series-runs.csv": _runs_csv(evidence.runs),
        "failing-runs.csv": _failing_csv(evidence.failing),
        "failing-clients.csv": _clients_csv(evidence.failing),
        "failing-runs.json": _failing_json(evidence.failing),
        "other-vantage-points.csv": _others_csv(evidence.other_runs),
        "reproduce.sh": _script(evidence, commands),
    }
    secrets = _secrets_of(evidence.endpoint)
    return {name: _cut(text, secrets) for name, text in files.items()}


def evidence_svg(evidence: Evidence) -> str:
    """The series per night, from the watch's rollups; from the runs listed when no night
    is rolled up yet (the watch rolls up once a night: a run of today has none)."""
    own, others = _night_points(evidence) if evidence.series_nights else _run_points(evidence)
    lines = [Line(f"{evidence.vantage_point.name} (this one)", own, main=True)]
    lines += [Line(name, points) for name, points in sorted(others.items())]
    failed = sorted({run.created_at.astimezone(UTC).date() for run in evidence.failing})
    title = f"{evidence.endpoint.name}: {evidence.metric} per night ({evidence.unit})"
    return nights_svg(
        title=title,
        unit=evidence.unit,
        lines=lines,
        change_night=evidence.change_night,
        failed_nights=failed,
    )


Points = list[tuple[date, float | None]]


def _night_points(evidence: Evidence) -> tuple[Points, dict[str, Points]]:
    own: Points = []
    others: dict[str, Points] = {}
    for night in evidence.series_nights:
        point = (night.night, night_value(evidence.metric, night))
        if night.vantage_point_id == evidence.vantage_point.pk:
            own.append(point)
        else:
            others.setdefault(night.vantage_point.name, []).append(point)
    return own, others


def _run_points(evidence: Evidence) -> tuple[Points, dict[str, Points]]:
    """Per night, the share of the runs that succeeded (availability), else the median of
    the metric over the runs that measured it."""
    by_night: dict[tuple[str, date], list[Run]] = {}
    for run in [*evidence.runs, *evidence.other_runs]:
        night = run.created_at.astimezone(UTC).date()
        by_night.setdefault((run.vantage_point.name, night), []).append(run)
    own: Points = []
    others: dict[str, Points] = {}
    for (name, night), runs in sorted(by_night.items()):
        point = (night, _runs_value(evidence.metric, runs))
        if name == evidence.vantage_point.name:
            own.append(point)
        else:
            others.setdefault(name, []).append(point)
    return own, others


def _runs_value(metric: str, runs: list[Run]) -> float | None:
    ended = [run for run in runs if run.status in Run.Status.ENDED]
    if metric == "availability":
        succeeded = sum(run.status == Run.Status.SUCCEEDED for run in ended)
        return succeeded / len(ended) if ended else None
    if metric.startswith("error:"):
        hits = sum(getattr(run, "error_class", None) == metric[6:] for run in ended)
        return hits / len(ended) if ended else None
    values = [v for run in ended if (v := getattr(run, metric, None)) is not None]
    return float(statistics.median(values)) if values else None


def evidence_readme(
    evidence: Evidence, *, commands: Sequence[Command] = (), page_url: str = ""
) -> str:
    """The README: for a site admin who never heard of fedprobe, what is wrong and how to
    see it for themselves, then what each file holds."""
    sections = [
        _heading(f"fedprobe evidence: {evidence.slug} on {evidence.endpoint.name}", "="),
        "fedprobe tests WLCG storage endpoints: from a few vantage points it reads test files "
        "(XRootD, HTTP/WebDAV, GridFTP) on a schedule and records how each read went. This "
        "archive is what it saw of your endpoint." + (f" Online: {page_url}" if page_url else ""),
        _heading("What is wrong"),
        evidence.what_is_wrong,
        _heading("Where"),
        _where(evidence),
        *(_regression_facts(evidence) if evidence.regression else []),
        _heading("The site or the path?"),
        evidence.site_or_path,
        _outcomes_text(evidence),
        _heading("Failing runs"),
        _failing_text(evidence),
        _heading("Versions, TLS and authentication"),
        _versions_text(evidence),
        _heading("Reproduce by hand"),
        _commands_text(evidence, commands),
        _heading("Files in this archive"),
        "\n".join(f"{name:<26} {what}" for name, what in FILES),
        _heading("Limits"),
        _limits_text(evidence),
    ]
    return "\n\n".join(part for part in sections if part) + "\n"


def _heading(text: str, rule: str = "-") -> str:
    return f"{text}\n{rule * len(text)}"


def _where(evidence: Evidence) -> str:
    endpoint, params = evidence.endpoint, evidence.parameter_set
    run = evidence.run
    nights = f"{evidence.nights[0]} to {evidence.nights[1]}"
    window = " to ".join(f"{t.astimezone(UTC):%Y-%m-%d %H:%M}" for t in evidence.compare_window)
    lines = [
        f"Site:          {endpoint.site.name}",
        f"Endpoint:      {endpoint.name} ({endpoint.protocol}, {endpoint.get_role_display()}) "
        f"{public_url(endpoint.base_url)}",
    ]
    if run is not None:
        lines.append(
            f"Test file:     {public_url(run.test_file.url)} ({format_size(run.test_file.size)})"
        )
    lines += [
        f"Test:          {params['method']} reads, {params['pattern']} pattern, "
        f"{format_size(params['read_size'])} per read, {params['fraction']:g} of the file, "
        f"{params['clients']} client(s) at once",
        f"Measured from: vantage point {evidence.vantage_point.name}",
        f"Nights shown:  {nights} (UTC)",
        f"Compared in:   {window} UTC",
    ]
    return "\n".join(lines)


def _regression_facts(evidence: Evidence) -> list[str]:
    regression = evidence.regression
    assert regression is not None
    before_now = (
        f"{regression.baseline:g} -> {regression.current:g} {evidence.unit}"
        if regression.baseline is not None and regression.current is not None
        else "-"
    )
    facts = [
        f"Severity:      {regression.severity} ({regression.state}, {regression.verdict})",
        f"Metric:        {regression.metric}",
        f"Change night:  {regression.change_night or '-'}",
        f"Before -> now: {before_now}",
        f"Detector:      {(regression.detector or {}).get('name', '-')}",
        f"Blamed on:     {(regression.blame or {}).get('target', '-')}",
    ]
    return [_heading("The alert"), "\n".join(facts)]


def _outcomes_text(evidence: Evidence) -> str:
    lines = ["Each vantage point's runs of this test in the comparison window:"]
    for index, outcome in enumerate(evidence.outcomes):
        lines.append("  " + _outcome_line(outcome, this=index == 0))
    return "\n".join(lines)


def _outcome_line(outcome: VantageOutcome, *, this: bool) -> str:
    name = f"{outcome.name} (this one)" if this else outcome.name
    if not outcome.runs:
        return f"{name}: no run"
    classes = ", ".join(f"{c} {n}" for c, n in sorted(outcome.error_classes.items()))
    text = f"{name}: {outcome.runs} run(s), {outcome.failed} failed"
    if classes:
        text += f" ({classes}); latest: {outcome.latest_error}"
    if outcome.tester_faults:
        text += f"; {outcome.tester_faults} more ended by fedprobe's own fault (left out)"
    return text


def _failing_text(evidence: Evidence) -> str:
    if not evidence.failing:
        return "No run of this series failed over the nights shown."
    shown = len(evidence.failing)
    head = f"{evidence.failing_total} run(s) of this series failed over the nights shown"
    if shown < evidence.failing_total:
        head += f"; the newest {shown} are in failing-*.csv and failing-runs.json"
    head += ":"
    lines = [head]
    for run in evidence.failing:
        first = run.errors[0] if run.errors else {}
        message = _one_line(without_secrets(str(first.get("message") or "")))
        lines.append(
            f"  run {run.pk}, {run.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC, "
            f"{run.status}: {first.get('class', '-')}: {message}"
        )
    return "\n".join(lines)


def _versions_text(evidence: Evidence) -> str:
    run = evidence.run
    if run is None:
        return "No run of this series ended: nothing was negotiated."
    tls = run.tls or None
    tls_text = (
        " ".join(str(v) for v in (tls.get("version"), tls.get("cipher")) if v) or "yes"
        if isinstance(tls, dict)
        else "none"
    )
    kind = run.endpoint.credential_kind
    lines = [
        f"Of run {run.pk} ({run.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC):",
        f"  Server:         {run.server_version or 'not reported'}",
        f"  Client:         {run.client_version or 'not reported'}",
        f"  TLS:            {tls_text}",
        f"  Authentication: {run.auth or 'not reached'} (the endpoint's credential: "
        f"{_credential_words(kind)}; never in this archive)",
        f"  Worker host:    {(run.result or {}).get('host') or run.worker or '-'}",
    ]
    if evidence.server_versions:
        lines.append(f"Server versions over the nights: {', '.join(evidence.server_versions)}")
    if evidence.client_versions:
        lines.append(f"Client versions over the nights: {', '.join(evidence.client_versions)}")
    regression = evidence.regression
    for change in (regression.versions if regression else None) or []:
        lines.append(f"Version change near the change: {json.dumps(change, sort_keys=True)}")
    return "\n".join(lines)


def _credential_words(kind: str) -> str:
    return {
        "token": "a bearer token",
        "x509": "an X.509 proxy",
        "none": "none, read anonymously",
    }[credential_of(kind)]


def _commands_text(evidence: Evidence, commands: Sequence[Command]) -> str:
    if not commands:
        return "No run of this series ended: no command to give."
    credential = credential_of(evidence.endpoint.credential_kind)
    parts = [CREDENTIAL_HELP[credential], "The same lines are in reproduce.sh."]
    parts += [f"# {command.tool}: {command.note}\n{command.line}" for command in commands]
    return "\n\n".join(parts)


def _script(evidence: Evidence, commands: Sequence[Command]) -> str:
    credential = credential_of(evidence.endpoint.credential_kind)
    lines = ["#!/bin/sh", f"# fedprobe evidence {evidence.slug}: reproduce by hand."]
    lines += [f"# {line}" for line in _wrap(CREDENTIAL_HELP[credential])]
    for command in commands:
        lines += ["", f"# {command.tool}: {command.note}", command.line]
    return "\n".join(lines) + "\n"


def _limits_text(evidence: Evidence) -> str:
    counts = [
        f"at most {MAX_RUNS} runs of the series (of {evidence.runs_total})",
        f"{MAX_FAILING} failing runs (of {evidence.failing_total}) with at most {MAX_CLIENTS} "
        "client records each",
        f"{MAX_OTHER_RUNS} runs of the other vantage points (of {evidence.other_runs_total})",
    ]
    return (
        f"This archive holds {'; '.join(counts)}: the newest are kept. Nothing secret is in "
        "it: no token, proxy or password; URLs lose their user part and query; messages "
        f"are redacted ({HIDDEN})."
    )


# -- CSV and JSON ------------------------------------------------------------------------


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(value) for value in row])
    return out.getvalue()


def _cell(value: Any) -> Any:
    """A spreadsheet never runs a cell as a formula, and no cell carries a secret."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, list | tuple):
        value = " ".join(str(v) for v in value)
    if not isinstance(value, str):
        return value
    value = without_secrets(value)
    return f"'{value}" if value.startswith(FORMULA_START) else value


def _nights_csv(evidence: Evidence) -> str:
    header = [
        "vantage_point", "night", "runs", "succeeded", "partial", "failed", "tester_faults",
        "errors", "metric", "value", "server_versions", "client_versions",
    ]  # fmt: skip
    rows = (
        [
            n.vantage_point.name,
            n.night.isoformat(),
            n.runs,
            n.succeeded,
            n.partial,
            n.failed,
            n.tester_faults,
            " ".join(f"{c}={k}" for c, k in sorted((n.errors or {}).items())),
            evidence.metric,
            night_value(evidence.metric, n),
            n.server_versions,
            n.client_versions,
        ]
        for n in evidence.series_nights
    )
    return _csv(header, rows)


def _runs_csv(runs: Sequence[Run]) -> str:
    header = [
        "id", "created_at", "status", "error_class", "error_message", "throughput_mbps",
        "open_s", "ttfb_s", "wall_s", "auth", "server_version", "client_version",
    ]  # fmt: skip
    rows = (
        [
            r.pk,
            r.created_at,
            r.status,
            getattr(r, "error_class", None),
            getattr(r, "error_message", None),
            r.throughput_mbps,
            r.open_s,
            r.ttfb_s,
            r.wall_s,
            r.auth,
            r.server_version,
            r.client_version,
        ]
        for r in runs
    )
    return _csv(header, rows)


def _failing_csv(runs: Sequence[Run]) -> str:
    header = ["id", "created_at", "vantage_point", "status", "error_class", "error_message"]
    rows = (
        [
            run.pk,
            run.created_at,
            run.vantage_point.name,
            run.status,
            e.get("class"),
            e.get("message"),
        ]
        for run in runs
        for e in (run.errors[:1] or [{}])
    )
    return _csv(header, rows)


def _clients_csv(runs: Sequence[Run]) -> str:
    header = [
        "run", "client", "status", "error_class", "error_message", "served_by", "open_s",
        "ttfb_s", "wall_s", "bytes_read", "throughput_mbps",
    ]  # fmt: skip
    rows = []
    for run in runs:
        for attempt in list(run.attempts.all())[:MAX_CLIENTS]:
            record = attempt.record or {}
            rows.append(
                [
                    run.pk,
                    attempt.client,
                    attempt.status,
                    attempt.error_class,
                    attempt.error_message,
                    record.get("served_by"),
                    record.get("open_s"),
                    record.get("ttfb_s"),
                    record.get("wall_s"),
                    attempt.bytes_read,
                    record.get("throughput_mbps"),
                ]
            )
    return _csv(header, rows)


def _failing_json(runs: Sequence[Run]) -> str:
    data = [
        {
            "id": run.pk,
            "created_at": run.created_at.astimezone(UTC).isoformat(),
            "vantage_point": run.vantage_point.name,
            "status": run.status,
            "errors": run.errors,
            "result": run.result,
            "clients": [
                {
                    "client": a.client,
                    "status": a.status,
                    "error": a.error_json(),
                    "record": {
                        k: v for k, v in (a.record or {}).items() if k not in BULKY_RECORD_KEYS
                    },
                }
                for a in list(run.attempts.all())[:MAX_CLIENTS]
            ],
        }
        for run in runs
    ]
    return json.dumps(_redacted(data), indent=1, sort_keys=True) + "\n"


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return without_secrets(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


def _others_csv(runs: Sequence[Run]) -> str:
    header = [
        "id", "vantage_point", "created_at", "status", "error_class", "error_message",
        "throughput_mbps", "server_version",
    ]  # fmt: skip
    rows = (
        [
            r.pk,
            r.vantage_point.name,
            r.created_at,
            r.status,
            getattr(r, "error_class", None),
            getattr(r, "error_message", None),
            r.throughput_mbps,
            r.server_version,
        ]
        for r in runs
    )
    return _csv(header, rows)


# -- the last guard --------------------------------------------------------------------------


def _secrets_of(endpoint: Endpoint) -> list[str]:
    """The endpoint's stored credential and its parts long enough to be secret: the token,
    each line of a proxy's PEM, each value of an oauth client's JSON."""
    stored = (endpoint.credential or "").strip()
    if not stored:
        return []
    parts = {stored, *(line.strip() for line in stored.splitlines())}
    try:
        parsed = json.loads(stored)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        parts |= {str(v) for v in parsed.values()}
    secrets = [p for p in parts if len(p) >= MIN_SECRET_CHARS and not p.startswith("-----")]
    return sorted(secrets, key=len, reverse=True)


def page_without_secrets(html: str, endpoint: Endpoint) -> str:
    """The evidence page's HTML with the last guard the archive has: the endpoint's stored
    credential cut wherever a message echoed it (as written, and as the template escaped it),
    even where the redaction did not recognise it as a secret."""
    secrets = _secrets_of(endpoint)
    escaped = [str(escape(secret)) for secret in secrets]
    return _cut(html, sorted({*secrets, *escaped}, key=len, reverse=True))


def _cut(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return text


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def _wrap(text: str, width: int = 90) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines
