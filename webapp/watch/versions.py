"""Server versions near a change: "began with server version 5.6.2, first seen 2026-11-20"
when the version a series' endpoint reported changed within FEDPROBE_WATCH_VERSION_NIGHTS
nights of the change night (docs/watch.md#versions)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from django.conf import settings

from webapp.watch.series import NightRow


def version_change(history: Sequence[NightRow], change_night: date) -> list[dict[str, str]]:
    """The server versions first seen within the window around `change_night` that no night
    before the window reported: [{"kind", "version", "first_seen", "previous"}]."""
    nights = timedelta(days=settings.FEDPROBE_WATCH_VERSION_NIGHTS)
    before = {
        v for row in history if row.night < change_night - nights for v in row.server_versions
    }
    if not before:
        return []
    changes: list[dict[str, str]] = []
    for row in history:
        if abs(row.night - change_night) > nights:
            continue
        for version in row.server_versions:
            if version not in before and version not in {c["version"] for c in changes}:
                changes.append(
                    {
                        "kind": "server",
                        "version": version,
                        "first_seen": row.night.isoformat(),
                        "previous": ", ".join(sorted(before)),
                    }
                )
    return changes
