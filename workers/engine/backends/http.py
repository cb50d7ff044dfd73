"""HTTP(S) and WebDAV (davs://) endpoints through httpx: Range reads on a kept-alive connection.

Each opened file has its own `httpx.Client` and so its own connection. What XrdHttp 5.5.3 does
that shapes this module:
- HEAD only stats the file (it answers 200 for a file it cannot read), so the open is a
  `Range: bytes=0-0` GET, which opens the file on the server and gives the size.
- A range reaching past the end of the file is answered with a Content-Length it never
  sends, then the connection is dropped. Reads are therefore clipped to the size found at
  open; a read starting at or past the end returns nothing without asking the server.
- A multi-range GET takes at most 1024 ranges; with more the server drops the connection.

The client itself (egress policy, the credential's redirection rule, failures as
ProbeError) is workers/engine/httpclient.py.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import httpcore
import httpx

from workers.engine.backends.base import (
    AsyncRecorder,
    Backend,
    CopyResult,
    FileFacts,
    Negotiated,
    OpenOptions,
    RemoteFile,
    VectorLimits,
)
from workers.engine.backends.byteranges import (
    MalformedRanges,
    MissingRanges,
    Part,
    chunk_views,
    parse_byteranges,
    parse_content_range,
    range_header,
    unsatisfied_range_total,
)
from workers.engine.backends.digests import ASKED, WANT_DIGEST, adler32_from_headers
from workers.engine.credentials import Access, AuthMethod
from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.httpclient import (
    ClientConfig,
    answer_error,
    body_error,
    body_excerpt_async,
    build_request,
    deadline_error,
    first_probe_error,
    head,
    http_url,
    send,
    send_async,
    served_by,
    status_error,
    status_failure,
    what_range,
)
from workers.engine.tls import ssl_context

MAX_RANGES = 1024
MAX_RANGE_BYTES = 2**31
# HEADs the preflight times on one kept-alive connection: the fastest is the round trip (a
# scheduler's hiccup on a shared worker makes one of them slower, not all).
RTT_REQUESTS = 5


class HttpBackend(Backend):
    """http://, https:// and davs:// endpoints (XrdHttp, dCache, EOS, StoRM, ...)."""

    def prepare(self, access: Access) -> None:
        client_cert = access.proxy_file if access.auth == AuthMethod.X509 else None
        ssl_context(access.ca_dir, client_cert)  # built once per process, before timing

    def open(self, url: str, options: OpenOptions) -> HttpFile:
        config = ClientConfig.of(url, options)
        client = config.client()
        try:
            return HttpFile(client, http_url(url), options.deadline, config)
        except BaseException:
            client.close()
            raise

    def client_version(self, *, copies: bool) -> str | None:
        """httpx over httpcore (HTTP/1.1), for reads and copies alike."""
        return f"httpx {httpx.__version__} (httpcore {httpcore.__version__})"

    def describe(self, url: str, options: OpenOptions) -> Negotiated:
        """The `Server` header and the TLS version and cipher of a HEAD's connection."""
        with ClientConfig.of(url, options).client() as client:
            request = build_request(client, "HEAD", http_url(url), options.deadline)
            response = send(client, request, f"HEAD {url}")
            tls = _tls_of(response)
            response.close()
        return Negotiated(server_version=response.headers.get("Server"), tls=tls)

    def round_trip_s(self, url: str, options: OpenOptions) -> float:
        """The fastest of RTT_REQUESTS HEADs on one kept-alive connection, after a first,
        untimed HEAD that connected (TCP, the TLS handshake, any redirection): each is then
        one round trip and the server's own time, as an xrootd stat on XrdCl's kept
        connection is. A HEAD on a connection of its own costs two round trips over http
        and about five over https (a 2 ms site measured 4.5 and 10.5 ms)."""
        with ClientConfig.of(url, options).client() as client:
            answered = head(client, http_url(url), options.deadline)
            fastest = math.inf
            for _ in range(RTT_REQUESTS):
                started = time.perf_counter()
                head(client, answered, options.deadline)
                fastest = min(fastest, time.perf_counter() - started)
        return fastest

    def stat_size(self, url: str, options: OpenOptions) -> int:
        with ClientConfig.of(url, options).client() as client:
            request = build_request(client, "HEAD", http_url(url), options.deadline)
            response = send(client, request, f"HEAD {url}")
            if response.status_code != 200:
                raise status_failure(response, f"HEAD {url}")
            response.close()
            length = response.headers.get("Content-Length")
        if length is not None and length.isdigit():
            return int(length)
        remote = self.open(url, options)  # no Content-Length: ask with a ranged GET
        remote.close()
        return remote.size

    def file_facts(self, url: str, options: OpenOptions) -> FileFacts:
        """One HEAD asking for the adler32 (backends/digests.py) gives both. XrdHttp without
        a checksum configured answers such a HEAD 405: the size is then asked without."""
        what = f"HEAD {url} with {ASKED}"
        with ClientConfig.of(url, options).client() as client:
            request = build_request(
                client, "HEAD", http_url(url), options.deadline, headers=WANT_DIGEST
            )
            response = send(client, request, what)
            if response.status_code in (401, 403, 404, 410):
                raise status_failure(response, what)
            response.close()
        if response.status_code != 200:
            refused = f"{what} answered {response.status_code} {response.reason_phrase}"
            return FileFacts(self.stat_size(url, options), "HEAD", None, refused)
        adler32, adler32_from = adler32_from_headers(response.headers)
        length = response.headers.get("Content-Length", "")
        if length.isdigit():
            return FileFacts(int(length), "the Content-Length of HEAD", adler32, adler32_from)
        return FileFacts(self.stat_size(url, options), "a ranged GET", adler32, adler32_from)

    def copy_to_local(self, url: str, dest: Path, options: OpenOptions) -> CopyResult:
        what = f"GET {url}"
        with ClientConfig.of(url, options).client() as client:
            request = build_request(client, "GET", http_url(url), options.deadline)
            response = send(client, request, what)
            if response.status_code != 200:
                raise status_failure(response, what)
            try:
                copied = _stream_to_file(response, dest, options.deadline, what)
            except BaseException:
                dest.unlink(missing_ok=True)
                raise
            return CopyResult(copied, served_by(response.url))


class HttpFile(RemoteFile):
    """One file on an HTTP endpoint, read with Range GETs on the client's own connection."""

    def __init__(
        self, client: httpx.Client, url: str, deadline: Deadline, config: ClientConfig
    ) -> None:
        self._client = client
        self._deadline = deadline
        self._config = config
        self.bytes_wire = 0
        self._url, self.size = self._probe(httpx.URL(url))
        self.served_by = served_by(self._url)
        self.bytes_wire = 0  # the open's one byte is its cost, like headers: not data moved

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size)
        if end <= offset:
            return b""
        ranges = f"bytes={offset}-{end - 1}"
        response = self._get(ranges)
        first, last, _ = _partial_range(response, self._url, ranges)
        if (first, last) != (offset, end - 1):
            response.close()
            raise answer_error(self._url, ranges, f"answered Content-Range {first}-{last}")
        return self._collect(response, ranges)

    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        return sum(len(view) for view in self.readv_views(chunks))

    def readv_views(self, chunks: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each chunk (empty past end of file) from one multi-range GET."""
        clipped = [(offset, max(0, min(size, self.size - offset))) for offset, size in chunks]
        wanted = [chunk for chunk in clipped if chunk[1] > 0]
        if not wanted:
            return [memoryview(b"") for _ in chunks]
        ranges = range_header(wanted)
        response = self._get(ranges)
        content_type = response.headers.get("Content-Type", "")
        try:
            if response.status_code == 206 and content_type.startswith("multipart/byteranges"):
                parts = parse_byteranges(self._collect(response, ranges), content_type)
            else:  # one range, or all of them coalesced into one: a plain 206
                first, _, _ = _partial_range(response, self._url, ranges)
                parts = [Part(first, memoryview(self._collect(response, ranges)))]
            return chunk_views(parts, clipped)
        except MalformedRanges as exc:
            error_class = ErrorClass.SHORT_READ if isinstance(exc, MissingRanges) else None
            raise answer_error(self._url, ranges, str(exc), error_class) from exc

    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        """HTTP/1.1 has no pipelining here: `depth` connections, one request on each at a time.

        Each of the `depth` workers has a client of its own: one shared pool of `depth`
        connections costs httpcore O(depth) per request and halves the rate at depth 16.
        """
        if requests:
            asyncio.run(self._read_async(requests, depth, record))

    def vector_limits(self) -> VectorLimits:
        return VectorLimits(MAX_RANGES, MAX_RANGE_BYTES)

    def close(self) -> None:
        self._client.close()

    def _probe(self, url: httpx.URL) -> tuple[httpx.URL, int]:
        """Open the file on the server with a one-byte GET: (the URL that answered, size)."""
        ranges = "bytes=0-0"
        request = build_request(self._client, "GET", url, self._deadline, ranges)
        trace = _ConnectionTrace()
        request.extensions["trace"] = trace
        response = send(self._client, request)
        self.open_phases = trace.phases
        answered = response.url
        size = _size_from_probe(response, answered, ranges)
        if size == 0:
            response.close()  # XrdHttp promises one byte of an empty file and sends none
        elif len(self._collect(response, ranges)) != 1:
            raise answer_error(answered, ranges, "sent no byte")
        return answered, size

    def _get(self, ranges: str) -> httpx.Response:
        request = build_request(self._client, "GET", self._url, self._deadline, ranges)
        return send(self._client, request)

    def _collect(self, response: httpx.Response, ranges: str) -> bytes:
        """The whole body, counted in bytes_wire even when it breaks off."""
        pieces: list[bytes] = []
        received = 0
        try:
            for piece in response.iter_raw():
                pieces.append(piece)
                received += len(piece)
                if time.time() > self._deadline.at:
                    raise deadline_error(self._url, ranges, received, response)
        except httpx.TransportError as exc:
            raise body_error(exc, self._url, ranges, received, response) from exc
        finally:
            self.bytes_wire += received
            response.close()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def _read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        pending = iter(requests)  # shared by the workers: memory stays flat however many
        try:
            async with asyncio.timeout(self._deadline.remaining()), asyncio.TaskGroup() as tg:
                for _ in range(max(1, min(depth, len(requests)))):
                    tg.create_task(self._async_worker(pending, record))
        except TimeoutError:
            raise ProbeError(
                ErrorClass.TIMEOUT, f"GET {self._url}: deadline passed during async reads"
            ) from None
        except BaseExceptionGroup as group:
            raise first_probe_error(group) from None

    async def _async_worker(
        self, pending: Iterator[tuple[int, int]], record: AsyncRecorder
    ) -> None:
        async with self._config.async_client(httpx.Limits(max_connections=1)) as client:
            await self._async_reads(client, pending, record)

    async def _async_reads(
        self, client: httpx.AsyncClient, pending: Iterator[tuple[int, int]], record: AsyncRecorder
    ) -> None:
        for offset, size in pending:
            end = min(offset + size, self.size)
            if end <= offset:
                record(0, 0)
                continue
            ranges = f"bytes={offset}-{end - 1}"
            request = build_request(client, "GET", self._url, self._deadline, ranges)
            started = time.perf_counter_ns()
            response = await send_async(client, request)
            await self._check_async_answer(response, ranges, offset, end - 1)
            received = await self._drain_async(response, ranges)
            record(time.perf_counter_ns() - started, received)

    async def _check_async_answer(
        self, response: httpx.Response, ranges: str, first: int, last: int
    ) -> None:
        if response.status_code != 206:
            excerpt = await body_excerpt_async(response)
            raise status_error(response, what_range(self._url, ranges), excerpt)
        try:
            if _content_range(response, self._url, ranges)[:2] != (first, last):
                raise answer_error(self._url, ranges, "answered another range")
        except ProbeError:
            await response.aclose()
            raise

    async def _drain_async(self, response: httpx.Response, ranges: str) -> int:
        received = 0
        try:
            async for piece in response.aiter_raw():
                received += len(piece)
        except httpx.TransportError as exc:
            raise body_error(exc, self._url, ranges, received, response) from exc
        finally:
            self.bytes_wire += received
            await response.aclose()
        return received


class _ConnectionTrace:
    """Times the steps of an open that httpcore reports: TCP connect and TLS handshake (the
    rest of the open, the request with its authorization, is the server's)."""

    STEPS: ClassVar[dict[str, str]] = {
        "connection.connect_tcp": "connect",
        "connection.start_tls": "tls",
    }

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._started: dict[str, float] = {}

    def __call__(self, event: str, info: dict[str, object]) -> None:
        step, _, stage = event.rpartition(".")
        name = self.STEPS.get(step)
        if name is None:
            return
        if stage == "started":
            self._started[name] = time.perf_counter()
        elif stage == "complete" and name in self._started:
            took = time.perf_counter() - self._started.pop(name)
            self.phases[name] = self.phases.get(name, 0.0) + took


def _tls_of(response: httpx.Response) -> dict[str, str | None] | None:
    """The TLS version and cipher of the connection that answered (None: plain http)."""
    stream = response.extensions.get("network_stream")
    ssl_object = stream.get_extra_info("ssl_object") if stream is not None else None
    if ssl_object is None:
        return None
    cipher = ssl_object.cipher()
    return {"version": ssl_object.version(), "cipher": cipher[0] if cipher else None}


def _stream_to_file(response: httpx.Response, dest: Path, deadline: Deadline, what: str) -> int:
    copied = 0
    try:
        with dest.open("wb") as sink:
            for piece in response.iter_raw():
                sink.write(piece)
                copied += len(piece)
                if time.time() > deadline.at:
                    raise ProbeError(
                        ErrorClass.TIMEOUT,
                        f"{what}: deadline passed after {copied} bytes",
                        bytes_received=copied,
                    )
    except httpx.TransportError as exc:
        raise body_error(exc, response.url, None, copied, response) from exc
    finally:
        response.close()
    expected = response.headers.get("Content-Length")
    if expected is not None and expected.isdigit() and copied != int(expected):
        raise ProbeError(ErrorClass.SHORT_READ, f"{what}: copied {copied} of {expected} bytes")
    return copied


def _size_from_probe(response: httpx.Response, url: httpx.URL, ranges: str) -> int:
    if response.status_code == 416:
        total = unsatisfied_range_total(response.headers.get("Content-Range", ""))
        if total is not None:
            response.close()
            return total
    if response.status_code == 200 and response.headers.get("Content-Length") == "0":
        return 0
    total = _partial_range(response, url, ranges)[2]
    if total < 0:
        response.close()
        raise answer_error(url, ranges, "did not tell the file size (Content-Range .../*)")
    return total


def _partial_range(response: httpx.Response, url: httpx.URL, ranges: str) -> tuple[int, int, int]:
    """(first, last, total) of a 206 answer's Content-Range; any other answer is an error."""
    if response.status_code != 206:
        raise status_failure(response, what_range(url, ranges))
    try:
        return _content_range(response, url, ranges)
    except ProbeError:
        response.close()
        raise


def _content_range(response: httpx.Response, url: httpx.URL, ranges: str) -> tuple[int, int, int]:
    try:
        return parse_content_range(response.headers.get("Content-Range", ""))
    except MalformedRanges as exc:
        raise answer_error(url, ranges, str(exc)) from exc
