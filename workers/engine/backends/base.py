"""What every protocol backend offers the measurement loop.

A backend opens one file for one client (`RemoteFile`) and can copy a whole file to local
scratch (`copy_to_local`). Reads raise `ProbeError` with an error class; they never return
short data silently.

Beyond reads (Operation in params.py): a backend whose protocol declares an operation
(protocols.py, `Protocol.operations`) creates and writes files (`create` ->
`WritableFile`), asks the server for a file's adler32 (`checksum`), deletes (`delete`),
lists a directory (`list_names`) and answers metadata storms with prepared calls
(`metadata_call`: stat, open-close, directory listing), each reusing the client's one
connection as a real job does.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workers.engine.credentials import Access
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.urls import host_of

# Called once per completed asynchronous request: (latency in ns, bytes delivered).
AsyncRecorder = Callable[[int, int], None]


@dataclass(frozen=True)
class VectorLimits:
    """How large one vectored read may be: the server's readv_iov_max and readv_ior_max."""

    max_chunks: int
    max_chunk_bytes: int


@dataclass(frozen=True)
class OpenOptions:
    """How a client connects: its own user name (own connection), TCP substreams, the
    egress policy its connections must pass (None: no check), and its credential and CA
    folder (`access`; XRootD and the copy tools take them from the process environment,
    which `Access.apply_environment` set)."""

    user: str
    streams: int
    deadline: Deadline
    egress: EgressPolicy | None = None
    access: Access = field(default_factory=Access)


@dataclass(frozen=True)
class Negotiated:
    """What a server said of itself and the connection: its software and version, and the
    TLS version and cipher where the client library tells them (None: not reported)."""

    server_version: str | None = None
    tls: dict[str, str | None] | None = None


@dataclass(frozen=True)
class FileFacts:
    """What a server says of a file without it being read: its size and adler32 (8 lowercase
    hex digits), each with where it came from, or (None) why it is not known."""

    size: int | None
    size_from: str
    adler32: str | None
    adler32_from: str


@dataclass(frozen=True)
class CopyResult:
    """A whole-file copy to local scratch: bytes moved and the server that sent them."""

    bytes_copied: int
    served_by: str


class RemoteFile(abc.ABC):
    """One open file on an endpoint, as one client sees it."""

    size: int
    served_by: str
    bytes_wire: int
    # Steps of the open the backend can time apart (HTTP: "connect", "tls"), in seconds.
    open_phases: dict[str, float] = {}  # noqa: RUF012 (replaced, never changed in place)

    @abc.abstractmethod
    def read(self, offset: int, size: int) -> bytes:
        """Read `size` bytes at `offset` (fewer only at end of file)."""

    @abc.abstractmethod
    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        """One vectored read of distinct (offset, size) chunks; returns bytes delivered."""

    @abc.abstractmethod
    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        """Read every (offset, size) with up to `depth` requests outstanding; blocks until done."""

    @abc.abstractmethod
    def vector_limits(self) -> VectorLimits:
        """The server's limits for one vectored read (queried where the protocol can)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the file; a backend's close may fail like any other operation."""


class WritableFile(abc.ABC):
    """One file being written on an endpoint, as one client writes it."""

    served_by: str

    @abc.abstractmethod
    def write(self, offset: int, data: bytes, timeout_s: int) -> None:
        """Write `data` at `offset`; returns once the server acknowledged it. `timeout_s`:
        the deadline's whole seconds left when the request starts (deadline.Countdown), for
        a protocol library that takes the request's timeout so (XrdCl); another checks the
        deadline its own way."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the file: the server commits it (a failure here is a failed write)."""

    def abort(self) -> None:
        """Give up a write that failed or was stopped, before its file is deleted: nothing
        of it may reach the server after the delete. By default a close whose failure is
        of no interest any more."""
        with contextlib.suppress(ProbeError):
            self.close()


# A prepared metadata operation on one URL: called once per operation, timed by the client,
# with the deadline's whole seconds left when the operation starts (deadline.Countdown; what
# XrdCl takes as a request's timeout, every request of the operation carrying it; HTTP's
# calls take theirs from the deadline).
MetadataCall = Callable[[int], object]


class Backend(abc.ABC):
    """A protocol: how to open, size and copy files behind URLs of its schemes."""

    def check_egress(self, url: str, options: OpenOptions) -> None:
        """Refuse (ProbeError, class egress) before any connection a URL whose host, or a
        server it is known to send clients to, the egress policy forbids."""
        if options.egress is not None:
            options.egress.check_url(url)

    def prepare(self, access: Access) -> None:  # noqa: B027 (most backends need nothing)
        """Build, before the clock starts, what the first open would otherwise pay for."""

    def describe(self, url: str, options: OpenOptions) -> Negotiated:
        """Ask the server what it runs and how the connection is protected (untimed)."""
        return Negotiated()

    def round_trip_s(self, url: str, options: OpenOptions) -> float:
        """The network's round-trip time to the endpoint, for the preflight (never in a
        timed phase): the time of one more stat. After the preflight's first stat, XrdCl asks
        on the connection it keeps, so this is one round trip and the server's own time; a
        protocol that connects per request measures on a connection it keeps (HttpBackend)."""
        started = time.perf_counter()
        self.stat_size(url, options)
        return time.perf_counter() - started

    def client_version(self, *, copies: bool) -> str | None:
        """The client library or tool a run's clients use here, and its version, for reads
        in place (`copies` False) or whole-file copies; None where there is none (file://)
        or it does not say. Found once per process (the backends cache it), never timed."""
        return None

    @abc.abstractmethod
    def open(self, url: str, options: OpenOptions) -> RemoteFile:
        """Connect and open `url` for reading (the open is part of what is measured)."""

    @abc.abstractmethod
    def stat_size(self, url: str, options: OpenOptions) -> int:
        """The file's size in bytes, asked before a run is planned."""

    @abc.abstractmethod
    def copy_to_local(self, url: str, dest: Path, options: OpenOptions) -> CopyResult:
        """Copy the whole file to `dest` with the protocol's own copy tool.

        `served_by` may be empty when the tool does not say; `copy_source` is then asked
        after the (timed) copy phase.
        """

    def file_facts(self, url: str, options: OpenOptions) -> FileFacts:
        """The file's size (its stat) and adler32 as the server knows them; ProbeError when
        the stat fails. A protocol that cannot ask for a checksum says so."""
        return FileFacts(
            self.stat_size(url, options), "stat", None, "this protocol gives no checksum"
        )

    def copy_source(self, url: str, options: OpenOptions) -> str:
        """The server a finished copy came from (asked outside the timed phase)."""
        return host_of(url)

    # -- beyond reads: backends that list the operation in `operations` override these --

    def create(self, url: str, size: int, options: OpenOptions) -> WritableFile:
        """Create `url` to write `size` bytes in it; it must not exist yet (never overwrite).
        (The size is what an HTTP PUT announces as its Content-Length.)"""
        raise self.unsupported("write")

    def checksum(self, url: str, options: OpenOptions) -> str:
        """The adler32 (8 lowercase hex digits) the server computes of the file it stored;
        ProbeError (class checksum) when it cannot say."""
        raise self.unsupported("write")

    def delete(self, url: str, options: OpenOptions) -> None:
        """Delete the file `url` (only ever one this engine wrote)."""
        raise self.unsupported("write")

    def list_names(self, url: str, options: OpenOptions) -> list[str]:
        """The names in the directory `url` (what the cleanup looks through)."""
        raise self.unsupported("list")

    def metadata_call(self, operation: str, url: str, options: OpenOptions) -> MetadataCall:
        """A call doing one `operation` ("stat", "open": open and close, "list") on `url`,
        prepared before the clock (parsed URL, the client's one connection) so that each
        timed operation is the protocol request alone; it raises ProbeError on failure."""
        raise self.unsupported(operation)

    def unsupported(self, operation: str) -> ProbeError:
        return ProbeError(
            ErrorClass.HARNESS, f"{type(self).__name__} does not do the {operation} operation"
        )
