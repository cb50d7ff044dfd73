"""Versions near a change: "began with server version 5.6.2, first seen 2026-11-20" when the
version a series' endpoint reported (`server`), or the client library or tool its runs used
(`client`), changed within FEDPROBE_WATCH_VERSION_NIGHTS nights of the change night
(docs/watch.md#versions)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from django.conf import settings

from webapp.watch.series import NightRow

KINDS = ("server", "client")


def version_change(history: Sequence[NightRow], change_night: date) -> list[dict[str, str]]:
    """The server versions, then the client versions, first seen within the window around
    `change_night` that no night before the window reported:
    [{"kind", "version", "first_seen", "previous"}]."""
    return [change for kind in KINDS for change in _changes(history, change_night, kind)]


def versions_summary(versions: Sequence[dict[str, str]]) -> str:
    """The first change of each kind in words, for a summary: "began with server version
    5.6.2, first seen 2026-11-20 and client version xrootd 6.2.1, first seen 2026-11-21"."""
    firsts = {change["kind"]: change for change in reversed(versions)}
    words = [
        f"{kind} version {firsts[kind]['version']}, first seen {firsts[kind]['first_seen']}"
        for kind in KINDS
        if kind in firsts
    ]
    return f"began with {' and '.join(words)}" if words else ""


def _versions(row: NightRow, kind: str) -> list[str]:
    return row.server_versions if kind == "server" else row.client_versions


def _changes(history: Sequence[NightRow], change_night: date, kind: str) -> list[dict[str, str]]:
    nights = timedelta(days=settings.FEDPROBE_WATCH_VERSION_NIGHTS)
    before = {
        v for row in history if row.night < change_night - nights for v in _versions(row, kind)
    }
    if not before:
        return []
    changes: list[dict[str, str]] = []
    for row in history:
        if abs(row.night - change_night) > nights:
            continue
        for version in _versions(row, kind):
            if version not in before and version not in {c["version"] for c in changes}:
                changes.append(
                    {
                        "kind": kind,
                        "version": version,
                        "first_seen": row.night.isoformat(),
                        "previous": ", ".join(sorted(before)),
                    }
                )
    return changes
