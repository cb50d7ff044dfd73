"""Run detail charts: each client's phases on a timeline, the latency histograms of each
operation kind merged over the clients, the data server that served each client, errors.

`run_charts` feeds both the run page (json_script) and the API's run detail, so the charts
and /api/v1/runs/{id}/ show the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework import serializers

from webapp.campaigns.models import ClientAttempt, Run
from workers.engine.histogram import LatencyHistogram, bucket_upper_ns
from workers.engine.metrics import READ_KINDS

# The engine's phase names (workers/engine/client.py), in the order a client goes through them.
PHASES = ("copy", "stage-wait", "open", "read", "close")


def run_charts(run: Run) -> dict[str, Any]:
    """The run's chart data, from its attempts. Runs fetched with run_detail have them
    prefetched, so this makes no query."""
    attempts = list(run.attempts.all())
    return {
        "released_at": (run.result or {}).get("released_at"),
        "timeline": [_client_timeline(attempt) for attempt in attempts],
        "latency_hist": latency_hist(attempt.record for attempt in attempts),
        "served_by_clients": _served_by_clients(attempts),
    }


def _client_timeline(attempt: ClientAttempt) -> dict[str, Any]:
    """One client's row of the timeline: its phases in seconds from the release, its first
    byte, where it ended and why it failed. A client that never reported has no phases."""
    record = attempt.record or {}
    return {
        "client": attempt.client,
        "status": attempt.status,
        "served_by": list(record.get("served_by") or []),
        "phases": [
            {"phase": p["phase"], "start_s": p["start_s"], "end_s": p["end_s"]}
            for p in record.get("phases") or []
        ],
        "ttfb_s": record.get("ttfb_s"),
        "end_s": record.get("wall_s"),
        "bytes_read": attempt.bytes_read,
        "error": attempt.error_json(),
    }


def latency_hist(records: Iterable[dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Per operation kind, the clients' latency histograms merged: the engine's summary
    (count, p50, p90, p99, max, mean in µs, as in the run JSON's latency_us) and the
    non-empty buckets with their edges in µs (from lower_us up to, not including, upper_us).
    Read kinds come first, then the others by name."""
    merged: dict[str, LatencyHistogram] = {}
    for record in records:
        for kind, data in ((record or {}).get("latency_hist") or {}).items():
            merged.setdefault(kind, LatencyHistogram()).merge(LatencyHistogram.from_json(data))
    kinds = sorted(merged, key=lambda kind: (kind not in READ_KINDS, kind))
    return {
        kind: {**merged[kind].summary_us(), "buckets": _buckets(merged[kind])} for kind in kinds
    }


def _buckets(hist: LatencyHistogram) -> list[dict[str, float | int]]:
    return [
        {
            "lower_us": (bucket_upper_ns(b - 1) + 1 if b else 0) / 1000,
            "upper_us": (bucket_upper_ns(b) + 1) / 1000,
            "count": n,
        }
        for b, n in sorted(hist.counts.items())
    ]


def _served_by_clients(attempts: list[ClientAttempt]) -> list[dict[str, Any]]:
    """Per data server (after redirection), the clients it served, how many ended well."""
    servers: dict[str, dict[str, Any]] = {}
    for attempt in attempts:
        for server in (attempt.record or {}).get("served_by") or []:
            row = servers.setdefault(server, {"server": server, "clients": [], "ok": 0})
            row["clients"].append(attempt.client)
            if attempt.status == ClientAttempt.Status.OK:
                row["ok"] += 1
    rows = [servers[name] for name in sorted(servers)]
    return [{**row, "failed": len(row["clients"]) - row["ok"]} for row in rows]


# -- the API's shape of these keys (OpenAPI schema of the run detail) --------------------------


class PhaseSerializer(serializers.Serializer[Any]):
    phase = serializers.CharField(help_text="copy, stage-wait, open, read or close")
    start_s = serializers.FloatField(help_text="seconds from the release of the clients")
    end_s = serializers.FloatField()


class ClientErrorSerializer(serializers.Serializer[Any]):
    # "class" is a Python keyword: the field is declared under another name, then renamed.
    error_class = serializers.CharField()
    message = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["class"] = fields.pop("error_class")
        return fields


class ClientTimelineSerializer(serializers.Serializer[Any]):
    client = serializers.IntegerField()
    status = serializers.CharField(help_text="the client's attempt: ok, failed, lost, ...")
    served_by = serializers.ListField(child=serializers.CharField())
    phases = PhaseSerializer(many=True)
    ttfb_s = serializers.FloatField(allow_null=True, help_text="first byte, from the release")
    end_s = serializers.FloatField(allow_null=True, help_text="where the client ended")
    bytes_read = serializers.IntegerField()
    error = ClientErrorSerializer(allow_null=True)


class LatencyBucketSerializer(serializers.Serializer[Any]):
    lower_us = serializers.FloatField()
    upper_us = serializers.FloatField(help_text="exclusive")
    count = serializers.IntegerField()


class LatencyHistSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    p50 = serializers.FloatField(help_text="µs")
    p90 = serializers.FloatField(help_text="µs")
    p99 = serializers.FloatField(help_text="µs")
    max = serializers.FloatField(help_text="µs")
    mean = serializers.FloatField(help_text="µs")
    buckets = LatencyBucketSerializer(many=True)


class ServedByClientsSerializer(serializers.Serializer[Any]):
    server = serializers.CharField()
    clients = serializers.ListField(child=serializers.IntegerField())
    ok = serializers.IntegerField(help_text="of those clients, how many ended well")
    failed = serializers.IntegerField()


class RunChartsSerializer(serializers.Serializer[Any]):
    """What run_charts returns."""

    released_at = serializers.CharField(allow_null=True)
    timeline = ClientTimelineSerializer(many=True)
    latency_hist = serializers.DictField(
        child=LatencyHistSerializer(), help_text="per operation kind, merged over the clients"
    )
    served_by_clients = ServedByClientsSerializer(many=True)


# The run page's chart of a copy's progress: an SVG of this size (its viewBox), drawn on
# the server from the run JSON's tpc.markers (a few dozen at most: one per 5 s per client).
TPC_CHART_WIDTH = 300
TPC_CHART_HEIGHT = 80


def tpc_progress(tpc: object) -> dict[str, Any] | None:
    """A third-party copy's performance markers as the run page shows them: each marker
    (seconds from the copy's start, bytes the server said it had moved, the rate since the
    marker before it, MB/s) and the polyline of bytes over time; None without markers."""
    markers = tpc.get("markers") if isinstance(tpc, dict) else None
    if not isinstance(markers, list):
        return None
    points = sorted(
        (float(m["t_s"]), int(m["bytes"]))
        for m in markers
        if isinstance(m, dict)
        and isinstance(m.get("t_s"), int | float)
        and isinstance(m.get("bytes"), int)
    )
    if not points:
        return None
    rows = []
    for i, (t_s, n_bytes) in enumerate(points):
        rate = None
        if i:
            before_t, before_bytes = points[i - 1]
            if t_s > before_t and n_bytes >= before_bytes:
                rate = (n_bytes - before_bytes) / (t_s - before_t) / 1e6
        rows.append({"t_s": t_s, "bytes": n_bytes, "rate_mbps": rate})
    last_t = max(points[-1][0], 1e-9)
    most = max(1, *(n for _, n in points))
    polyline = " ".join(
        f"{t / last_t * TPC_CHART_WIDTH:.1f},{TPC_CHART_HEIGHT - n / most * TPC_CHART_HEIGHT:.1f}"
        for t, n in points
    )
    return {
        "markers": rows,
        "points": polyline,
        "last_t_s": points[-1][0],
        "most_bytes": most,
        "width": TPC_CHART_WIDTH,
        "height": TPC_CHART_HEIGHT,
    }
