"""HTTP(S) and WebDAV (davs://) endpoints through httpx: Range reads on a kept-alive connection.

Each opened file has its own `httpx.Client` and so its own connection. What XrdHttp 5.5.3 does
that shapes this module:
- HEAD only stats the file (it answers 200 for a file it cannot read), so the open is a
  `Range: bytes=0-0` GET, which opens the file on the server and gives the size.
- A range reaching past the end of the file is answered with a Content-Length it never
  sends, then the connection is dropped. Reads are therefore clipped to the size found at
  open; a read starting at or past the end returns nothing without asking the server.
- A multi-range GET takes at most 1024 ranges; with more the server drops the connection.

Redirections are followed here, not by httpx, so that the token rule holds for every hop: a
bearer token goes only over https, to the endpoint's own origin (its host and port) or to a
host listed for it (`credential_hosts`: door.example.org may send us to pool7.example.org
when `.example.org` or that host is listed), never anywhere else (`token_may_go`). An X.509
proxy is presented as TLS client certificate: a redirection elsewhere ends the request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import ssl
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

import anyio.to_thread
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
from workers.engine.credential_scope import CredentialScope
from workers.engine.credentials import Access, AuthMethod
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy, IPAddress, resolve
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.families import note_connected, pinned
from workers.engine.params import AddressFamily
from workers.engine.tls import ssl_context, tls_error

SCHEMES = {"http": "http", "https": "https", "davs": "https"}
MAX_RANGES = 1024
MAX_RANGE_BYTES = 2**31
MAX_REDIRECTS = 10
_REDIRECT_KEEPS_METHOD = (307, 308)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_E = TypeVar("_E", bound=BaseException)
# What a redirected request asks again of the next hop (never Authorization: _CredentialAuth).
_CARRIED = ("Range", *WANT_DIGEST)
# identity: a compressed answer would not be the file's bytes.
_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "fedprobe"}
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
            request = _request(client, "HEAD", http_url(url), options.deadline)
            response = _send(client, request, f"HEAD {url}")
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
            answered = _head(client, http_url(url), options.deadline)
            fastest = math.inf
            for _ in range(RTT_REQUESTS):
                started = time.perf_counter()
                _head(client, answered, options.deadline)
                fastest = min(fastest, time.perf_counter() - started)
        return fastest

    def stat_size(self, url: str, options: OpenOptions) -> int:
        with ClientConfig.of(url, options).client() as client:
            request = _request(client, "HEAD", http_url(url), options.deadline)
            response = _send(client, request, f"HEAD {url}")
            if response.status_code != 200:
                raise _status_failure(response, f"HEAD {url}")
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
            request = _request(client, "HEAD", http_url(url), options.deadline, headers=WANT_DIGEST)
            response = _send(client, request, what)
            if response.status_code in (401, 403, 404, 410):
                raise _status_failure(response, what)
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
            request = _request(client, "GET", http_url(url), options.deadline)
            response = _send(client, request, what)
            if response.status_code != 200:
                raise _status_failure(response, what)
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
            raise _answer_error(self._url, ranges, f"answered Content-Range {first}-{last}")
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
            raise _answer_error(self._url, ranges, str(exc), error_class) from exc

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
        request = _request(self._client, "GET", url, self._deadline, ranges)
        trace = _ConnectionTrace()
        request.extensions["trace"] = trace
        response = _send(self._client, request)
        self.open_phases = trace.phases
        answered = response.url
        size = _size_from_probe(response, answered, ranges)
        if size == 0:
            response.close()  # XrdHttp promises one byte of an empty file and sends none
        elif len(self._collect(response, ranges)) != 1:
            raise _answer_error(answered, ranges, "sent no byte")
        return answered, size

    def _get(self, ranges: str) -> httpx.Response:
        request = _request(self._client, "GET", self._url, self._deadline, ranges)
        return _send(self._client, request)

    def _collect(self, response: httpx.Response, ranges: str) -> bytes:
        """The whole body, counted in bytes_wire even when it breaks off."""
        pieces: list[bytes] = []
        received = 0
        try:
            for piece in response.iter_raw():
                pieces.append(piece)
                received += len(piece)
                if time.time() > self._deadline.at:
                    raise _deadline_error(self._url, ranges, received, response)
        except httpx.TransportError as exc:
            raise _body_error(exc, self._url, ranges, received, response) from exc
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
            raise _first_probe_error(group) from None

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
            request = _request(client, "GET", self._url, self._deadline, ranges)
            started = time.perf_counter_ns()
            response = await _send_async(client, request)
            await self._check_async_answer(response, ranges, offset, end - 1)
            received = await self._drain_async(response, ranges)
            record(time.perf_counter_ns() - started, received)

    async def _check_async_answer(
        self, response: httpx.Response, ranges: str, first: int, last: int
    ) -> None:
        if response.status_code != 206:
            excerpt = await _body_excerpt_async(response)
            raise _status_error(response, _what_range(self._url, ranges), excerpt)
        try:
            if _content_range(response, self._url, ranges)[:2] != (first, last):
                raise _answer_error(self._url, ranges, "answered another range")
        except ProbeError:
            await response.aclose()
            raise

    async def _drain_async(self, response: httpx.Response, ranges: str) -> int:
        received = 0
        try:
            async for piece in response.aiter_raw():
                received += len(piece)
        except httpx.TransportError as exc:
            raise _body_error(exc, self._url, ranges, received, response) from exc
        finally:
            self.bytes_wire += received
            await response.aclose()
        return received


def http_url(url: str) -> str:
    """`url` with davs:// mapped to https://; other schemes are not ours."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in SCHEMES:
        raise ValueError(f"not an HTTP or WebDAV URL: {url!r}")
    return f"{SCHEMES[scheme.lower()]}://{rest}"


def served_by(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port or _DEFAULT_PORTS.get(url.scheme, 0)}"


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


def token_may_go(origin: httpx.URL, target: httpx.URL, hosts: Sequence[str] = ()) -> bool:
    """May a token meant for `origin` (the endpoint) be sent to `target` (a redirection)?

    Only over https, and only to the endpoint's own origin (its host and port) or to a host
    listed for it (`hosts`: urls.check_credential_hosts' names, addresses and .suffixes, whose
    suffixes are never public ones: `se.ac.uk` sends nothing to `attacker.ac.uk`): the rule
    of every protocol, credential_scope.CredentialScope.
    """
    return _may_go(_scope(origin, hosts), target)


def _scope(origin: httpx.URL, hosts: Sequence[str]) -> CredentialScope:
    return CredentialScope(((origin.host.lower(), _port(origin)),), tuple(hosts))


def _may_go(scope: CredentialScope, target: httpx.URL) -> bool:
    return target.scheme == "https" and scope.allows(target.host, _port(target))


def _port(url: httpx.URL) -> int:
    return url.port or 443  # both URLs are https:// here (http_url writes davs:// so)


class _CredentialAuth(httpx.Auth):
    """The run's credential on each request it may go to (`token_may_go`): the bearer token as
    Authorization, left off elsewhere. A proxy is the TLS client certificate of every
    connection the client makes, which cannot be held back from one hop: a redirection over
    https to a host it may not go to ends the request instead (class egress)."""

    def __init__(
        self,
        origin: httpx.URL,
        hosts: Sequence[str] = (),
        *,
        token: str | None = None,
        client_cert: bool = False,
    ) -> None:
        self._header = None if token is None else f"Bearer {token}"
        self._client_cert = client_cert
        self._origin = origin
        self._scope = _scope(origin, hosts)

    def __repr__(self) -> str:
        return f"_CredentialAuth(origin={self._origin})"  # never the token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        url = request.url
        if _may_go(self._scope, url):
            if self._header is not None:
                request.headers["Authorization"] = self._header
        elif self._client_cert and url.scheme == "https":
            raise ProbeError(
                ErrorClass.EGRESS,
                f"refused: a redirection to {url.host}:{_port(url)}, where the run's proxy (the "
                f"TLS client certificate) may not go: that host is {self._scope.not_in_scope()}",
            )
        yield request


@dataclass(frozen=True)
class ClientConfig:
    """How the clients of one opened file connect: egress policy, TLS, credential."""

    egress: EgressPolicy | None
    context: ssl.SSLContext
    auth: httpx.Auth | None
    # The address family the run is held to, and in a run per address its address.
    family: str = AddressFamily.ANY
    address: str | None = None

    @classmethod
    def of(cls, url: str, options: OpenOptions) -> ClientConfig:
        access = options.access
        client_cert = access.proxy_file if access.auth == AuthMethod.X509 else None
        context = ssl_context(access.ca_dir, client_cert)
        token = access.bearer_token()
        origin = httpx.URL(http_url(url))
        auth = None
        if token is not None or client_cert is not None:
            auth = _CredentialAuth(
                origin, access.credential_hosts, token=token, client_cert=client_cert is not None
            )
        return cls(options.egress, context, auth, access.address_family, access.address)

    @classmethod
    def for_tls(cls, *, egress: EgressPolicy | None, ca_dir: str | None) -> ClientConfig:
        """No credential of a run: verified TLS and the egress policy (a token endpoint)."""
        return cls(egress, ssl_context(ca_dir), None)

    def client(self) -> httpx.Client:
        # trust_env=False: no proxy from the environment between us and the endpoint.
        transport = httpx.HTTPTransport(verify=self.context, http2=False)
        pool = transport._pool  # httpx has no public way to give its pool a network backend
        pool._network_backend = _CheckedBackend(self, pool._network_backend)
        return httpx.Client(
            transport=transport,
            auth=self.auth,
            follow_redirects=False,  # _send follows them, applying the token rule
            trust_env=False,
            headers=_HEADERS,
        )

    def async_client(self, limits: httpx.Limits) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(verify=self.context, http2=False, limits=limits)
        pool = transport._pool
        pool._network_backend = _CheckedAsyncBackend(self, pool._network_backend)
        return httpx.AsyncClient(
            transport=transport,
            auth=self.auth,
            follow_redirects=False,
            trust_env=False,
            headers=_HEADERS,
        )


class _CheckedBackend(httpcore.NetworkBackend):
    """Every connection (redirections included) goes to an address the egress policy passed
    and of the run's address family (families.pinned), resolved once: what was checked is
    what is connected to, so DNS cannot change it between. TLS still verifies and sends the
    host name (httpcore passes it to start_tls). The peer each connection reached is noted
    from its socket (families.note_connected): the run's `address`."""

    def __init__(self, config: ClientConfig, inner: httpcore.NetworkBackend) -> None:
        self._config = config
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = _addresses(self._config, host, port)
        failure: Exception | None = None
        for address in addresses:  # in the resolver's order, as socket.create_connection
            try:
                stream = self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
            else:
                note_connected(stream.get_extra_info("server_addr"))
                return stream
        raise _no_address(host, failure)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _CheckedAsyncBackend(httpcore.AsyncNetworkBackend):
    """_CheckedBackend for the async clients (the resolver runs on a thread)."""

    def __init__(self, config: ClientConfig, inner: httpcore.AsyncNetworkBackend) -> None:
        self._config = config
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses: list[IPAddress] = await anyio.to_thread.run_sync(
            _addresses, self._config, host, port
        )
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
            else:
                note_connected(stream.get_extra_info("server_addr"))
                return stream
        raise _no_address(host, failure)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _addresses(config: ClientConfig, host: str, port: int) -> list[IPAddress]:
    """Where a connection to host:port may go: the egress policy's checked addresses (all
    of the name's when there is none), of the run's family."""
    egress = config.egress
    addresses = egress.check_host(host, port) if egress is not None else resolve(host, port)
    return pinned(addresses, host, config.family, config.address)


def _no_address(host: str, failure: Exception | None) -> Exception:
    """The last connection error (httpx maps it to refused or timeout as usual)."""
    return failure or httpcore.ConnectError(f"{host} has no address to connect to")


def _request(
    client: httpx.Client | httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    deadline: Deadline,
    ranges: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> httpx.Request:
    remaining = deadline.remaining()
    if remaining <= 0:
        raise ProbeError(ErrorClass.TIMEOUT, f"{method} {url}: deadline passed before the request")
    # A read's request (no other headers) builds one small dict, as before facts asked.
    sent: Mapping[str, str] | None = {"Range": ranges} if ranges else None
    if headers:
        sent = {**headers, **(sent or {})}
    return client.build_request(method, url, headers=sent, timeout=remaining)


def _head(client: httpx.Client, url: httpx.URL | str, deadline: Deadline) -> httpx.URL:
    """A HEAD that must answer 200, its connection kept for the next: the URL that answered."""
    request = _request(client, "HEAD", url, deadline)
    response = _send(client, request, f"HEAD {url}")
    # Read to its (empty) end: httpcore keeps a connection only for a response it saw end,
    # and closing it unread made every HEAD connect again.
    response.read()
    response.close()
    if response.status_code != 200:
        raise _status_failure(response, f"HEAD {url}")
    return response.url


def _send(client: httpx.Client, request: httpx.Request, what: str = "") -> httpx.Response:
    """Send, following redirections (each hop passes the egress policy at connect time and
    the credential rule in _CredentialAuth)."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _request_error(exc, what or _what(request)) from exc
        if not response.has_redirect_location:
            return response
        response.close()
        request = _redirected(client, request, response)
    raise _too_many_redirects(what or _what(request))


async def _send_async(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _request_error(exc, _what(request)) from exc
        if not response.has_redirect_location:
            return response
        await response.aclose()
        request = _redirected(client, request, response)
    raise _too_many_redirects(_what(request))


def send_form(
    config: ClientConfig,
    url: str,
    form: dict[str, str],
    *,
    basic_auth: tuple[str, str],
    timeout_s: float,
    what: str,
) -> tuple[int, bytes]:
    """POST a form (no redirection followed) and return the status and at most 64 KiB of
    the answer, within `timeout_s` in all (httpx's timeouts are per step: a server that
    trickles its answer would hold it longer); ProbeError when no answer comes."""
    ends = time.monotonic() + timeout_s
    with config.client() as client:
        request = client.build_request(
            "POST", url, data=form, timeout=timeout_s, headers={"Accept": "application/json"}
        )
        credentials = base64.b64encode(":".join(basic_auth).encode()).decode("ascii")
        request.headers["Authorization"] = f"Basic {credentials}"
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _request_error(exc, what) from exc
        try:
            body = b""
            for piece in response.iter_raw():
                body += piece
                if len(body) > 65536:
                    break
                if time.monotonic() > ends:
                    raise ProbeError(
                        ErrorClass.TIMEOUT, f"{what}: no whole answer in {timeout_s:.0f} s"
                    )
        except httpx.HTTPError as exc:
            raise _request_error(exc, what) from exc
        finally:
            response.close()
    return response.status_code, body[:65536]


def _redirected(
    client: httpx.Client | httpx.AsyncClient, request: httpx.Request, response: httpx.Response
) -> httpx.Request:
    """The request a redirection asks for: same method (GET after a 303 to a GET or POST),
    same Range, the time left; never the Authorization of the previous hop."""
    url = request.url.join(response.headers["Location"])
    method = request.method
    if response.status_code not in _REDIRECT_KEEPS_METHOD and method not in ("GET", "HEAD"):
        method = "GET"
    headers = {name: request.headers[name] for name in _CARRIED if name in request.headers}
    return client.build_request(method, url, headers=headers, extensions=request.extensions)


def _too_many_redirects(what: str) -> ProbeError:
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: more than {MAX_REDIRECTS} redirections")


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
        raise _body_error(exc, response.url, None, copied, response) from exc
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
        raise _answer_error(url, ranges, "did not tell the file size (Content-Range .../*)")
    return total


def _partial_range(response: httpx.Response, url: httpx.URL, ranges: str) -> tuple[int, int, int]:
    """(first, last, total) of a 206 answer's Content-Range; any other answer is an error."""
    if response.status_code != 206:
        raise _status_failure(response, _what_range(url, ranges))
    try:
        return _content_range(response, url, ranges)
    except ProbeError:
        response.close()
        raise


def _content_range(response: httpx.Response, url: httpx.URL, ranges: str) -> tuple[int, int, int]:
    try:
        return parse_content_range(response.headers.get("Content-Range", ""))
    except MalformedRanges as exc:
        raise _answer_error(url, ranges, str(exc)) from exc


def _status_failure(response: httpx.Response, what: str) -> ProbeError:
    """The error for an unexpected status, quoting the start of the server's explanation."""
    excerpt = b""
    if response.status_code >= 300:
        with contextlib.suppress(httpx.HTTPError):
            excerpt = next(response.iter_raw(), b"")[:200]
    response.close()
    return _status_error(response, what, excerpt)


async def _body_excerpt_async(response: httpx.Response) -> bytes:
    excerpt = b""
    if response.status_code >= 300:
        with contextlib.suppress(httpx.HTTPError):
            excerpt = await anext(response.aiter_raw(), b"")
    await response.aclose()
    return excerpt[:200]


def _status_error(response: httpx.Response, what: str, excerpt: bytes) -> ProbeError:
    status = f"{response.status_code} {response.reason_phrase}"
    if response.status_code == 200:
        status += " to a Range request: the server ignores Range"
    elif text := excerpt.decode("utf-8", "replace").strip():
        status += f": {text}"
    if response.status_code in (401, 403):
        return ProbeError(ErrorClass.AUTH, f"{what}: {status}")
    if response.status_code in (404, 410):
        return ProbeError(ErrorClass.NOT_FOUND, f"{what}: {status}")
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: {status}")


def _request_error(exc: httpx.HTTPError, what: str) -> ProbeError:
    """The ProbeError for a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        return ProbeError(ErrorClass.TIMEOUT, f"{what}: no answer in time ({exc!r})")
    handshake = _cause(exc, ssl.SSLError)
    if handshake is not None:
        return tls_error(what, handshake)
    if isinstance(exc, httpx.ConnectError):
        return ProbeError(ErrorClass.REFUSED, f"{what}: cannot connect: {exc}")
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: {type(exc).__name__}: {exc}")


def _body_error(
    exc: httpx.TransportError,
    url: httpx.URL,
    ranges: str | None,
    received: int,
    response: httpx.Response,
) -> ProbeError:
    expected = response.headers.get("Content-Length", "?")
    detail = f"body broke off after {received} of {expected} bytes: {exc}"
    error_class = (
        ErrorClass.TIMEOUT if isinstance(exc, httpx.TimeoutException) else ErrorClass.SHORT_READ
    )
    return ProbeError(error_class, f"{_what_range(url, ranges)}: {detail}", bytes_received=received)


def _deadline_error(
    url: httpx.URL, ranges: str, received: int, response: httpx.Response
) -> ProbeError:
    expected = response.headers.get("Content-Length", "?")
    return ProbeError(
        ErrorClass.TIMEOUT,
        f"{_what_range(url, ranges)}: deadline passed after {received} of {expected} bytes",
        bytes_received=received,
    )


def _answer_error(
    url: httpx.URL, ranges: str, detail: str, error_class: ErrorClass | None = None
) -> ProbeError:
    return ProbeError(
        error_class or ErrorClass.SERVER_ERROR, f"{_what_range(url, ranges)}: {detail}"
    )


def _what(request: httpx.Request) -> str:
    return _what_range(request.url, request.headers.get("Range"), request.method)


def _what_range(url: httpx.URL, ranges: str | None, method: str = "GET") -> str:
    if ranges is None:
        return f"{method} {url}"
    if len(ranges) > 64:
        ranges = f"{ranges[:48]}... ({ranges.count(',') + 1} ranges)"
    return f"{method} {url} Range {ranges}"


def _cause(exc: BaseException, kind: type[_E]) -> _E | None:
    """The first exception of `kind` in the chain of causes of `exc`."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, kind):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _first_probe_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    probe_errors, _ = group.split(ProbeError)
    if probe_errors is None:
        return group
    first: BaseException = probe_errors
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
