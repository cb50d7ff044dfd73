"""Recorded jobs to replay (operation `replay`): an XRootD client-recorder CSV uploaded once,
checked by the engine's parser at upload (a bad line is refused naming it), and chosen by
campaigns (Campaign.trace). A run's worker gets the text by its campaign (a deployment's own
worker) or by its sha256 over the agent API (a remote vantage point), and writes it to a
private file for the engine (RunParams.trace is a path on the worker host).

The text is kept in the database, not on a shared disk: workers share nothing but it and the
queue, and a trace is small (MAX_TRACE_TEXT)."""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, models, transaction

from workers.engine.credentials import private_run_file
from workers.engine.errors import InvalidParams
from workers.engine.params import Operation, RunParams
from workers.engine.trace import Trace as ParsedTrace
from workers.engine.trace import parse_trace, recorded_paths_at

# The largest trace text accepted (bytes of UTF-8): a whole job's accesses fit in far less,
# and every run of a replay campaign reads it from the database.
MAX_TRACE_TEXT = 4 * 1024 * 1024
MAX_NAME = 100


class Trace(models.Model):
    """One recorded job: its CSV and what the parser said of it at upload."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="traces"
    )
    name = models.CharField(max_length=MAX_NAME, unique=True)
    text = models.TextField(help_text="the recorder's CSV")
    sha256 = models.CharField(max_length=64, unique=True, help_text="of the text's UTF-8 bytes")
    size = models.PositiveIntegerField(help_text="bytes of the CSV")
    files = models.JSONField(
        default=list, help_text="the recorded remote files' paths, in the order first opened"
    )
    operations = models.PositiveIntegerField(help_text="operations replayed (opens to closes)")
    bytes_read = models.PositiveBigIntegerField(help_text="bytes the recorded reads delivered")
    duration_s = models.FloatField(help_text="from the first operation's start to the last end")
    left_out = models.JSONField(default=dict, help_text="recorded lines not replayed, by reason")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def urls_at(self, root_url: str) -> tuple[str, ...]:
        """A replay's URLs on an endpoint: the recorded paths there, one per file, in order
        (from the paths stored at upload: no parse of the CSV per run)."""
        return recorded_paths_at(ParsedTrace(tuple(self.files), (), ()), root_url)


class TraceRefused(Exception):
    """A trace not stored or not deleted, and why, naming the field (`name`, `trace`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TraceSummary:
    files: list[str]
    operations: int
    bytes_read: int
    duration_s: float
    left_out: dict[str, int]


def trace_summary(text: str) -> TraceSummary:
    """What the engine reads in `text`; TraceRefused("trace", "line 12: ...") when it cannot
    (the same check a worker's run makes, done before anything is stored)."""
    size = len(text.encode("utf-8"))
    if size > MAX_TRACE_TEXT:
        raise TraceRefused("trace", f"has {size} bytes, more than {MAX_TRACE_TEXT} (4 MiB)")
    try:
        parsed = parse_trace(io.StringIO(text, newline=""))
    except InvalidParams as exc:
        raise TraceRefused("trace", exc.message) from None
    return TraceSummary(
        files=["/" + urlsplit(url).path.lstrip("/") for url in parsed.files],
        operations=len(parsed.ops),
        bytes_read=parsed.bytes_read,
        duration_s=parsed.duration_s,
        left_out=dict(parsed.left_out),
    )


def trace_create(*, name: str, text: str, owner: User | None) -> Trace:
    """Store a checked trace; TraceRefused naming `name` (empty, taken) or `trace` (too big,
    a bad line, the same text stored already under another name)."""
    name = name.strip()
    if not name:
        raise TraceRefused("name", "a trace needs a name")
    if len(name) > MAX_NAME:
        raise TraceRefused("name", f"at most {MAX_NAME} characters")
    if Trace.objects.filter(name=name).exists():
        raise TraceRefused("name", f"a trace named {name!r} exists already")
    summary = trace_summary(text)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    same = Trace.objects.filter(sha256=sha256).first()
    if same is not None:
        raise TraceRefused("trace", f"the same CSV is stored already, as {same.name!r}")
    try:
        with transaction.atomic():
            return Trace.objects.create(
                owner=owner,
                name=name,
                text=text,
                sha256=sha256,
                size=len(text.encode("utf-8")),
                files=summary.files,
                operations=summary.operations,
                bytes_read=summary.bytes_read,
                duration_s=summary.duration_s,
                left_out=summary.left_out,
            )
    except IntegrityError:  # stored meanwhile by another upload
        raise TraceRefused("name", f"a trace named {name!r} exists already") from None


def trace_delete(*, trace: Trace) -> None:
    """Delete a trace no campaign replays and no run replayed; TraceRefused naming the
    campaigns that do, or how many runs did (each run says which trace it replayed: its
    record would lose that)."""
    using = sorted(trace.campaigns.values_list("name", flat=True))
    if using:
        raise TraceRefused(
            "trace",
            f"{trace.name!r} is replayed by campaign{'s' if len(using) > 1 else ''} "
            f"{', '.join(using)}: choose another trace there (or delete them) first",
        )
    runs = trace.runs.count()
    if runs:
        raise TraceRefused(
            "trace",
            f"{trace.name!r} was replayed by {runs} run{'s' if runs > 1 else ''}, which say "
            "they replayed it: it is kept while they are (delete their campaigns first)",
        )
    try:
        with transaction.atomic():
            trace.delete()
    except models.ProtectedError:  # chosen or replayed meanwhile
        raise TraceRefused(
            "trace", f"{trace.name!r} was chosen by a campaign or replayed meanwhile"
        ) from None


# The name of the trace file in a run's private folder.
TRACE_FILE = "trace.csv"


@contextlib.contextmanager
def params_with_trace(params: RunParams, text: str | None) -> Iterator[RunParams]:
    """A replay's parameters with its trace written to the run's private folder (0600,
    removed when the block ends); other runs' (or a replay's without a trace, which the
    engine refuses naming `trace`) unchanged."""
    if params.operation != Operation.REPLAY or text is None:
        yield params
        return
    with private_run_file(TRACE_FILE, text) as path:
        yield replace(params, trace=path)
