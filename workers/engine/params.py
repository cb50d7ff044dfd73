"""The parameters of one run, their bounds, and the deadline they imply."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from functools import cached_property
from typing import TypeVar
from urllib.parse import urlsplit

from workers.engine.credentials import Credential, check_ca_dir
from workers.engine.egress import EgressPolicy
from workers.engine.errors import InvalidParams
from workers.engine.protocols import protocol_of
from workers.engine.urls import (
    check_credential_hosts,
    check_file_roots,
    check_url,
)

MAX_READ_SIZE = 64 * 1024 * 1024
MAX_CLIENTS = 256
MAX_FILES = 1024
MAX_DEPTH = 1024
MAX_VECTOR_SIZE = 1024
MAX_STREAMS = 15
MAX_SKIP = 1_000_000
MAX_READAHEAD = 1024 * 1024 * 1024
MAX_TIMEOUT_S = 6 * 3600
MAX_FILE_SIZE = 64 * 1024**3
MAX_OPS = 1_000_000
MAX_RATE = 1_000_000.0
# (lowest, highest) of each whole-number field of RunParams, checked in this order after
# read_size and fraction (RunParams.validate).
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "read_size": (1, MAX_READ_SIZE),
    "clients": (1, MAX_CLIENTS),
    "files": (1, MAX_FILES),
    "depth": (1, MAX_DEPTH),
    "vector_size": (1, MAX_VECTOR_SIZE),
    "skip": (0, MAX_SKIP),
    "readahead": (0, MAX_READAHEAD),
    "streams": (1, MAX_STREAMS),
    "file_size": (1, MAX_FILE_SIZE),
    "ops": (1, MAX_OPS),
}
# A derived deadline (docs/engine.md, Deadlines) allows each client a fixed margin, its
# bytes at a minimum rate, and each of its round trips RTT_FACTOR times the round-trip time
# the preflight measured, at least MIN_ROUND_TRIP_S (a disk seek, a busy server).
DEADLINE_MARGIN_S = 60.0
MIN_RATE_BPS = 1_000_000
RTT_FACTOR = 4.0
MIN_ROUND_TRIP_S = 0.005
# Round trips to open a file on a new connection through a redirector, and close it.
FILE_ROUND_TRIPS = 10
# Round trips of one metadata operation (open-close: two requests).
METADATA_ROUND_TRIPS = {"stat": 1, "open": 2, "list": 1}
# After a write: the server's checksum and the delete.
WRITE_AFTER_ROUND_TRIPS = 2

# What names the files a write makes (they are deleted by exactly these names): a run tag is
# letters, digits, "_" and "-", so a name can never leave its directory or match another's.
RUN_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
WRITTEN_PREFIX = "fedprobe-"


def written_name(run_tag: str, client: int, k: int) -> str:
    """The name of the k-th file client `client` of run `run_tag` writes."""
    return f"{WRITTEN_PREFIX}{run_tag}-c{client}-f{k}"


def written_names(run_tag: str) -> re.Pattern[str]:
    """Every name written_name gives for `run_tag`, and nothing else (the cleanup's filter)."""
    return re.compile(rf"{WRITTEN_PREFIX}{re.escape(run_tag)}-c[0-9]+-f[0-9]+")


def in_directory(directory_url: str, name: str) -> str:
    """The URL of `name` in the directory `directory_url` (checked by RunParams.validate:
    no query, no fragment)."""
    return f"{directory_url.rstrip('/')}/{name}"


def check_directory_url(url: str, field: str = "url") -> None:
    """A directory a write (or a cleanup) may put files in: a plain URL with a path."""
    if "?" in url or "#" in url:
        raise InvalidParams(field, f"{url!r}: a directory URL has no ?query or #fragment")
    if url.rstrip("/").rsplit("/", 1)[-1].startswith(WRITTEN_PREFIX):
        raise InvalidParams(field, f"{url!r} is a written file, not a directory")


_File = TypeVar("_File")


def needed_bytes(fraction: float, file_size: int) -> int:
    """Bytes a reader needs to have read `fraction` of a file: the plan asks for exactly this."""
    return min(file_size, math.ceil(fraction * file_size))


def file_collection(first: _File, others: Sequence[_File], files: int) -> list[_File]:
    """The collection a run with `files` files per client reads: `first`, then `others`, up
    to `files` in all (more would never be read: see RunParams.client_urls)."""
    return [first, *others[: max(0, files - 1)]]


class Operation(StrEnum):
    """What a run's clients do to the endpoint: read (the default), write and delete, copy
    between two endpoints (third-party copy, pulled by the destination or pushed by the
    source), metadata storms (stat, open-close, directory listing), or replay a recorded
    job's accesses."""

    READ = "read"
    WRITE = "write"
    TPC_PULL = "tpc-pull"
    TPC_PUSH = "tpc-push"
    STAT = "stat"
    OPEN = "open"
    LIST = "list"
    REPLAY = "replay"


TPC_OPERATIONS = frozenset({Operation.TPC_PULL, Operation.TPC_PUSH})
METADATA_OPERATIONS = frozenset({Operation.STAT, Operation.OPEN, Operation.LIST})


class ReplayTiming(StrEnum):
    """How a replay paces a recorded trace: as fast as possible, or with its think times."""

    ASAP = "asap"
    RECORDED = "recorded"


class AddressFamily(StrEnum):
    """Which addresses of the endpoint's name a run may use: any (the client library's
    choice), IPv4 only, IPv6 only, or each address of the name separately."""

    ANY = "any"
    IPV4 = "4"
    IPV6 = "6"
    EACH = "each"


class Method(StrEnum):
    """How a client gets at the data (paper 000, 001)."""

    DIRECT = "direct"
    COPY = "copy"
    STAGE = "stage"


class Pattern(StrEnum):
    """Which bytes a client reads, in what order (papers 000, 002, 003)."""

    SEQUENTIAL = "sequential"
    RANDOM = "random"
    SKIP = "skip"
    VECTOR = "vector"
    ASYNC = "async"


@dataclass(frozen=True)
class RunParams:
    """One cell of a campaign: what N clients do against one endpoint from here."""

    urls: tuple[str, ...]
    method: Method = Method.DIRECT
    pattern: Pattern = Pattern.SEQUENTIAL
    read_size: int = 4096
    fraction: float = 0.1
    clients: int = 1
    files: int = 1
    depth: int = 64
    vector_size: int = 256
    skip: int = 3
    readahead: int = 0
    streams: int = 1
    operation: Operation = Operation.READ
    # write: bytes each client writes per file (in read_size requests).
    file_size: int = 16 * 1024 * 1024
    # stat, open, list: operations per client, and a target rate per client (0: flat out).
    ops: int = 1000
    rate: float = 0.0
    # tpc-pull, tpc-push: the destination directory URL (the URLs are the sources).
    destination: str | None = None
    # What the destination is given for the copy (a token scoped to write there; None: the
    # destination is open). Like `credential`, it never leaves this process.
    destination_credential: Credential | None = field(default=None, compare=False, repr=False)
    # replay: the recorder CSV on this host, and its pacing.
    trace: str | None = None
    replay_timing: ReplayTiming = ReplayTiming.ASAP
    address_family: AddressFamily = AddressFamily.ANY
    # Names the files a write or a copy makes (fedprobe-<run_tag>-c<client>-f<k>).
    run_tag: str | None = None
    timeout_s: float | None = None
    seed: int = 1
    # Known checksums of the files read, as (url, adler32 in 8 hex digits) pairs.
    adler32: tuple[tuple[str, str], ...] = ()
    scratch_dir: str | None = None
    file_roots: tuple[str, ...] | None = field(default=None, compare=False)
    # Where clients may connect (workers always pass one); None checks nothing (the CLI).
    egress: EgressPolicy | None = field(default=None, compare=False)
    # What the clients present (None: nothing), and the CA folder servers are verified
    # against (None: the system store). The credential never leaves this process: clients
    # read it from the run's private folder (credentials.run_secrets).
    credential: Credential | None = field(default=None, compare=False, repr=False)
    ca_dir: str | None = None
    # The hosts the credential may also go to when the endpoint redirects (host names and
    # addresses, or .domain suffixes: urls.check_credential_hosts); its own host always.
    credential_hosts: tuple[str, ...] = ()
    # Seconds the run spent before the engine started, getting its credential (an oauth
    # client's token request): an explicit timeout_s covers them too.
    credential_s: float = 0.0

    @cached_property
    def url_schemes(self) -> tuple[str, ...]:
        """Each URL's scheme: the URLs are checked (check_url) once, here, for the run."""
        return tuple(check_url(url) for url in self.urls)

    @property
    def scheme(self) -> str:
        """The run's protocol: the scheme of all its URLs (validate)."""
        return self.url_schemes[0]

    def without_credential(self) -> RunParams:
        """A copy without the credential (what the preflight and the clients are given),
        with its URLs checked already."""
        copy = replace(self, credential=None, destination_credential=None)
        copy.__dict__["url_schemes"] = self.url_schemes
        return copy

    def validate(self) -> None:
        """Raise InvalidParams naming the first field that is out of bounds."""
        _check_choice("method", self.method, Method)
        _check_choice("pattern", self.pattern, Pattern)
        _check_choice("operation", self.operation, Operation)
        _check_choice("replay_timing", self.replay_timing, ReplayTiming)
        _check_choice("address_family", self.address_family, AddressFamily)
        if not (isinstance(self.rate, float | int) and 0 <= self.rate <= MAX_RATE):
            raise InvalidParams("rate", f"{self.rate!r} is not in 0..{MAX_RATE:g} (0: flat out)")
        if not self.urls:
            raise InvalidParams("url", "at least one URL is needed")
        schemes = set(self.url_schemes)
        if len(schemes) > 1:
            raise InvalidParams("url", f"a run reads over one protocol, not {sorted(schemes)}")
        for url, scheme in zip(self.urls, self.url_schemes, strict=True):
            if self.credential is not None:
                self.credential.auth_method(scheme)
            if scheme == "file":
                check_file_roots(url, self.file_roots)
            if protocol_of(scheme).copy_only and self.method == Method.DIRECT:
                raise InvalidParams(
                    "method", f"{scheme}:// is a copy protocol: use method copy or stage"
                )
        _check_supported(self.operation, self.url_schemes[0])
        refusal = protocol_of(self.url_schemes[0]).family_refusal
        if refusal is not None and self.address_family != AddressFamily.ANY:
            raise InvalidParams("address_family", refusal)
        _check_int("read_size", self.read_size, *INT_BOUNDS["read_size"])
        if self.run_tag is not None and not (
            isinstance(self.run_tag, str) and RUN_TAG.fullmatch(self.run_tag)
        ):
            raise InvalidParams(
                "run_tag", f"{self.run_tag!r} is not 1-64 letters, digits, '_' or '-'"
            )
        if self.operation == Operation.WRITE:
            for url in self.urls:
                check_directory_url(url)
        if not (isinstance(self.fraction, float | int) and 0 < self.fraction <= 1):
            raise InvalidParams("fraction", f"{self.fraction!r} is not in (0, 1]")
        for name, (low, high) in INT_BOUNDS.items():
            _check_int(name, getattr(self, name), low, high)
        if self.readahead and self.pattern in (Pattern.VECTOR, Pattern.ASYNC):
            raise InvalidParams(
                "readahead", "applies to sequential, random and skip reads, not vector or async"
            )
        if self.timeout_s is not None and not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InvalidParams("timeout", f"{self.timeout_s!r} s is not in (0, {MAX_TIMEOUT_S}]")
        written = check_credential_hosts(self.credential_hosts)
        if written != self.credential_hosts:  # matched as written: lowercase, ASCII, no repeats
            raise InvalidParams("credential_hosts", f"write them as {list(written)}")
        if not 0 <= self.credential_s < math.inf:
            raise InvalidParams("credential_s", f"{self.credential_s!r} is not a duration")
        check_ca_dir(self.ca_dir)
        self._check_destination()
        for _, text in self.adler32:
            if len(text) != 8 or any(c not in "0123456789abcdef" for c in text.lower()):
                raise InvalidParams("adler32", f"{text!r} is not 8 hex digits")

    @property
    def destination_scheme(self) -> str | None:
        """The destination's scheme, for a third-party copy (checked by validate)."""
        return None if self.destination is None else urlsplit(self.destination).scheme.lower()

    def _check_destination(self) -> None:
        """A copy needs a destination directory of the sources' protocol (HTTP-TPC between
        http, https, davs; native XRootD TPC between root servers, which pull only: the
        protocol declares tpc-pull alone); other operations take none."""
        if self.operation not in TPC_OPERATIONS:
            if self.destination is not None:
                raise InvalidParams("destination", f"only for {', '.join(sorted(TPC_OPERATIONS))}")
            return
        if self.destination is None:
            raise InvalidParams("destination", f"{self.operation} needs a destination URL")
        scheme = check_url(self.destination, field="destination")
        protocol = protocol_of(self.scheme)
        if protocol_of(scheme) is not protocol:
            raise InvalidParams(
                "destination",
                f"a {self.scheme}:// source is copied to {protocol.title} "
                f"({', '.join(sorted(protocol.scheme_names))}), not {scheme}://",
            )
        if self.destination_credential is not None:
            self.destination_credential.auth_method(scheme)

    def check_file_size(self, url: str, size: int) -> None:
        """Refuse a file that cannot hold even one read."""
        if size < self.read_size:
            raise InvalidParams(
                "read_size",
                f"{url} has {size} bytes, smaller than one read of {self.read_size} bytes",
            )

    def deadline_s(
        self,
        file_size: int,
        *,
        rtt_s: float = 0.0,
        vector_limits: tuple[int, int] | None = None,
    ) -> float:
        """The run's deadline: --timeout, or derived from what one client moves and waits
        for in `files` files of `file_size` bytes at `rtt_s` (docs/engine.md, Deadlines)."""
        if self.timeout_s is not None:
            return self.timeout_s
        bytes_s = self.wire_bytes(file_size) / MIN_RATE_BPS
        round_trip_s = max(RTT_FACTOR * rtt_s, MIN_ROUND_TRIP_S)
        waits_s = self.round_trips(file_size, vector_limits) * round_trip_s
        if self.operation in METADATA_OPERATIONS:  # ops per client, not per file
            paced_s = self.ops / self.rate if self.rate else 0.0
            return min(MAX_TIMEOUT_S, DEADLINE_MARGIN_S + waits_s + paced_s)
        return min(MAX_TIMEOUT_S, DEADLINE_MARGIN_S + self.files * (bytes_s + waits_s))

    def unreachable_fraction(self) -> str | None:
        """Why the plan reads less than `fraction` of a file, if it does: a skip pattern
        reads one block in skip + 1, so it cannot go past 1 / (skip + 1) of the file."""
        if self.pattern != Pattern.SKIP:
            return None
        reachable = 1 / (self.skip + 1)
        if self.fraction <= reachable:
            return None
        return (
            f"pattern skip with skip {self.skip} reads one block in {self.skip + 1}, at most "
            f"{reachable:.0%} of a file: this run reads {reachable:.0%}, not {self.fraction:.0%}"
        )

    def planned_bytes(self, file_size: int) -> int:
        """Bytes one client asks for in one file (what the reader needs; all of it for a
        third-party copy)."""
        if self.operation in TPC_OPERATIONS:
            return file_size
        return needed_bytes(self.fraction, file_size)

    def client_urls(self, client: int) -> tuple[str, ...]:
        """The URLs client `client` reads: `files` of the collection, starting at URL
        client * files (the clients share the collection round-robin)."""
        urls = self.urls
        return tuple(urls[(client * self.files + k) % len(urls)] for k in range(self.files))

    def client_planned_bytes(self, sizes: Mapping[str, int]) -> list[int]:
        """Bytes each client plans to read (planned_bytes of its files), by client index."""
        return [
            sum(self.planned_bytes(sizes[url]) for url in self.client_urls(client))
            for client in range(self.clients)
        ]

    def delivered_bytes(self, file_size: int) -> int:
        """Bytes one client gets of one file: the whole file for a copy (copy, stage), else
        what the reader needs."""
        return self.planned_bytes(file_size) if self.method == Method.DIRECT else file_size

    def run_delivered_bytes(self, file_size: int) -> int:
        """delivered_bytes of the whole run, every file of `file_size` bytes."""
        return self.clients * self.files * self.delivered_bytes(file_size)

    def wire_bytes(self, file_size: int) -> int:
        """At most the bytes one client moves for one file: whole files for copies, whole
        windows for read-ahead, else what the reader needs; a write, the file it writes
        (file_size); metadata operations, none to speak of."""
        if self.operation == Operation.WRITE:
            return self.file_size
        if self.operation in METADATA_OPERATIONS:
            return 0
        if self.method != Method.DIRECT or self.operation in TPC_OPERATIONS:
            return file_size
        if self.readahead > self.read_size:
            return max(self.planned_bytes(file_size), self._fetches(file_size) * self.readahead)
        return self.planned_bytes(file_size)

    def round_trips(self, file_size: int, vector_limits: tuple[int, int] | None = None) -> int:
        """The requests of one client in one file that each wait for the one before: one
        per read, readv or read-ahead fetch, reads / depth for async reads, plus opening
        and closing. A copy streams the file (its bytes bound it): only opening counts.
        A write: its write requests, the checksum query and the delete; metadata
        operations: all `ops` of a client (once: not per file) and its first connection."""
        if self.operation == Operation.WRITE:
            writes = math.ceil(self.file_size / self.read_size)
            return FILE_ROUND_TRIPS + writes + WRITE_AFTER_ROUND_TRIPS
        if self.operation in METADATA_OPERATIONS:
            return FILE_ROUND_TRIPS + self.ops * METADATA_ROUND_TRIPS[str(self.operation)]
        if self.method != Method.DIRECT:
            return FILE_ROUND_TRIPS
        reads = self.reads(file_size)
        if self.pattern == Pattern.VECTOR:
            waits = _vector_batches(reads, self.read_size, self.vector_size, vector_limits)
        elif self.pattern == Pattern.ASYNC:
            waits = math.ceil(reads / self.depth)
        else:
            waits = self._fetches(file_size)
        return FILE_ROUND_TRIPS + waits

    def reads(self, file_size: int) -> int:
        """How many read_size requests one client sends for one file (patterns.py)."""
        needed = math.ceil(self.planned_bytes(file_size) / self.read_size)
        if self.pattern == Pattern.SKIP:
            return min(needed, math.ceil(file_size / (self.read_size * (self.skip + 1))))
        return needed

    def _fetches(self, file_size: int) -> int:
        """Synchronous requests reaching the endpoint: reads, or read-ahead windows. A window
        of an ordered pattern serves every read that fits in it; random reads seldom hit."""
        reads = self.reads(file_size)
        if self.readahead <= self.read_size or self.pattern == Pattern.RANDOM:
            return reads
        stride = self.read_size * (self.skip + 1 if self.pattern == Pattern.SKIP else 1)
        per_window = 1 + (self.readahead - self.read_size) // stride
        return math.ceil(reads / per_window)

    def to_json(self) -> dict[str, object]:
        data = asdict(replace(self, credential=None, destination_credential=None))
        data["urls"] = list(self.urls)
        data["adler32"] = dict(self.adler32)
        data["credential_hosts"] = list(self.credential_hosts)
        data["method"] = str(self.method)
        data["pattern"] = str(self.pattern)
        data["operation"] = str(self.operation)
        data["replay_timing"] = str(self.replay_timing)
        data["address_family"] = str(self.address_family)
        data.pop("file_roots")
        data.pop("egress")
        data.pop("scratch_dir")
        data.pop("credential")
        data.pop("destination_credential")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunParams:
        """What to_json wrote (a remote vantage point's claim answer), checked as validate
        checks; a field of the wrong shape is InvalidParams naming it. Nothing this host adds
        (file roots, egress policy, credential, CA folder, a replay's trace file) is read
        from it."""
        known = {f.name for f in fields(cls)} - _HOST_FIELDS
        unknown = sorted(set(data) - known - {"ca_dir", "trace"})
        if unknown:
            raise InvalidParams(unknown[0], "is not a run parameter")
        values = {name: data[name] for name in known if name in data}
        values["urls"] = tuple(str(url) for url in _listed(data.get("urls"), "urls"))
        values["credential_hosts"] = tuple(
            str(host) for host in _listed(data.get("credential_hosts", []), "credential_hosts")
        )
        adler32 = data.get("adler32", {})
        if not isinstance(adler32, dict):
            raise InvalidParams("adler32", "is not a map of URL to checksum")
        values["adler32"] = tuple((str(url), str(a)) for url, a in adler32.items())
        method, pattern = data.get("method", Method.DIRECT), data.get("pattern", Pattern.SEQUENTIAL)
        _check_choice("method", method, Method)
        _check_choice("pattern", pattern, Pattern)
        values["method"], values["pattern"] = Method(str(method)), Pattern(str(pattern))
        for name, choices in _CHOICES.items():
            if name in values:
                _check_choice(name, values[name], choices)
                values[name] = choices(str(values[name]))
        for name in ("fraction", "credential_s", "rate"):
            if name in values and not isinstance(values[name], int | float):
                raise InvalidParams(name, f"{values[name]!r} is not a number")
        timeout = values.get("timeout_s")
        if timeout is not None and not isinstance(timeout, int | float):
            raise InvalidParams("timeout", f"{timeout!r} is not a number")
        params = cls(**values)  # type: ignore[arg-type]
        params.validate()
        return params


# The other choice fields, as from_json reads them.
_CHOICES: dict[str, type[StrEnum]] = {
    "operation": Operation,
    "replay_timing": ReplayTiming,
    "address_family": AddressFamily,
}

# What a host adds to a run's parameters itself: never taken from another host's JSON.
# A replay's trace is a path on this host: a remote vantage point writes the file itself
# (fetched by its hash), never a path another host named.
_HOST_FIELDS = frozenset(
    {
        "file_roots",
        "egress",
        "credential",
        "destination_credential",
        "ca_dir",
        "scratch_dir",
        "trace",
    }
)


def _listed(value: object, name: str) -> list[object]:
    if not isinstance(value, list):
        raise InvalidParams(name, "is not a list")
    return value


def _vector_batches(
    reads: int, read_size: int, vector_size: int, limits: tuple[int, int] | None
) -> int:
    """How many readvs carry `reads` chunks (patterns.vector_batches, without duplicates)."""
    max_chunks, max_chunk_bytes = limits or (vector_size, read_size)
    chunks = reads * math.ceil(read_size / max(1, max_chunk_bytes))
    return math.ceil(chunks / max(1, min(vector_size, max_chunks)))


def _check_supported(operation: Operation, scheme: str) -> None:
    """Refuse an operation the URLs' protocol does not support (protocols.py declares it)."""
    protocol = protocol_of(scheme)
    if operation not in protocol.operations:
        supported = ", ".join(sorted(protocol.operations))
        raise InvalidParams(
            "operation",
            f"{scheme}:// ({protocol.name}) does not support {str(operation)!r}"
            f": it supports {supported}",
        )


def _check_choice(name: str, value: object, choices: type[StrEnum]) -> None:
    allowed = [str(c) for c in choices]
    if str(value) not in allowed:
        raise InvalidParams(name, f"{value!r} is not one of {', '.join(allowed)}")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParams(name, f"{value!r} is not a whole number")
    if not low <= value <= high:
        raise InvalidParams(name, f"{value} is not in {low}..{high}")
