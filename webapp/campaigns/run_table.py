"""What the runs page shows of a run beyond its columns: its first error, and the sortable
headers with the links that sort by them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

from django.http import QueryDict

from webapp.campaigns.filters import RUN_ORDERING
from webapp.campaigns.models import Run
from webapp.core.redact import redact

# scheme://user[:password]@: redact() hides the password, this the whole user part.
USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")

DEFAULT_ORDERING = "-created"
# The direction of a first click: the triage question each column answers first (newest,
# longest, slowest); a second click reverses it.
FIRST_DESCENDING = frozenset({"created", "wall_s"})


def without_secrets(text: str) -> str:
    """A message as users may see it: redacted, and without the user part of any URL."""
    return USERINFO.sub(r"\1", redact(text))


def without_userinfo(url: str) -> str:
    """The URL without its user:password@ (and without a query, which may carry a token)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class RunError(NamedTuple):
    """A run's first error: its class, the message's first line, and the whole message."""

    error_class: str
    first_line: str
    message: str

    @classmethod
    def of(cls, run: Run) -> RunError | None:
        """From with_first_error's annotations (None for a run without errors)."""
        error_class = getattr(run, "error_class", None)
        if not error_class:
            return None
        message = without_secrets(getattr(run, "error_message", None) or "")
        first_line = message.strip().splitlines()[0] if message.strip() else ""
        return cls(error_class, first_line, message)


@dataclass(frozen=True)
class Column:
    """A header of the runs table: sortable when it has a key."""

    label: str
    key: str = ""
    numeric: bool = False
    href: str = ""
    sort: str = ""  # "ascending", "descending" or "" (aria-sort)


def run_list_columns(query: QueryDict, ordering: str) -> list[Column]:
    """The headers, each sortable one linking to this query sorted by it (first page)."""
    current = ordering or DEFAULT_ORDERING
    return [
        Column("Run"),
        _sortable("Status", "status", query, current),
        Column("Progress"),
        Column("Error"),
        _sortable("Wall time", "wall_s", query, current, numeric=True),
        _sortable("Throughput (MB/s)", "throughput_mbps", query, current, numeric=True),
        Column("Endpoint"),
        Column("Vantage point"),
        Column("Campaign"),
        Column("Parameters"),
        _sortable("Created", "created", query, current),
    ]


def _sortable(
    label: str, key: str, query: QueryDict, current: str, *, numeric: bool = False
) -> Column:
    assert key in RUN_ORDERING, key
    sort = ""
    if current.lstrip("-") == key:
        sort = "descending" if current.startswith("-") else "ascending"
        target = key if sort == "descending" else f"-{key}"
    else:
        target = f"-{key}" if key in FIRST_DESCENDING else key
    linked = query.copy()
    linked.pop("page", None)
    linked["ordering"] = target
    return Column(label, key, numeric, f"?{linked.urlencode()}", sort)
