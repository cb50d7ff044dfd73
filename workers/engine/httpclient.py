"""The HTTP client of every HTTP request the engine and the web application make: httpx with
the egress policy at connect time, the endpoint's credential only where it may go, and
failures as ProbeError.

Redirections are followed here, not by httpx, so that the token rule holds for every hop: a
bearer token goes only over https, to the endpoint's own origin (its host and port) or to a
host listed for it (`credential_hosts`: door.example.org may send us to pool7.example.org
when `.example.org` or that host is listed), never anywhere else (`token_may_go`). An X.509
proxy is presented as TLS client certificate: a redirection elsewhere ends the request.
Every connection, redirections included, goes to an address the egress policy passed
(`_CheckedBackend`), resolved once.

A new kind of request (PUT, DELETE, COPY, PROPFIND, ...) uses it so:

    config = ClientConfig.of(url, options)       # egress, TLS, credential of the run
    with config.client() as client:
        response = exchange(client, "DELETE", http_url(url), options.deadline,
                            expect=(200, 204))   # ProbeError for any other status
        response.close()                         # or read it: the body is not read yet

`exchange` builds the request (the deadline's time left as its timeout), sends it following
redirections under the credential rule, and maps a failure to ProbeError: no answer
(`request_error`: timeout, tls, refused), a status not expected (`status_failure`: auth for
401/403, not-found for 404/410, server-error otherwise, quoting the server). For more control
use its steps: `build_request`, `send` (or `send_async` with `config.async_client`), then the
error helpers. A redirected request carries only CARRIED_HEADERS of the previous one (never
Authorization): a request kind whose meaning is in other headers (Destination, Overwrite,
Depth) adds them there, and one with a body (PUT) must send it again after a 307/308, which
`redirected` does not do.
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import time
from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio.to_thread
import httpcore
import httpx

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.digests import WANT_DIGEST
from workers.engine.credential_scope import CredentialScope
from workers.engine.credentials import AuthMethod
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy, IPAddress, resolve
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.families import note_connected, pinned
from workers.engine.params import AddressFamily
from workers.engine.protocols import DEFAULT_PORTS
from workers.engine.tls import ssl_context, tls_error

SCHEMES = {"http": "http", "https": "https", "davs": "https"}
MAX_REDIRECTS = 10
_REDIRECT_KEEPS_METHOD = (307, 308)
_E = TypeVar("_E", bound=BaseException)
# What a redirected request asks again of the next hop (never Authorization: CredentialAuth).
CARRIED_HEADERS = ("Range", *WANT_DIGEST)
# identity: a compressed answer would not be the file's bytes.
HEADERS = {"Accept-Encoding": "identity", "User-Agent": "fedprobe"}


def exchange(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    deadline: Deadline,
    *,
    headers: Mapping[str, str] | None = None,
    expect: Collection[int] = (200,),
    what: str | None = None,
) -> httpx.Response:
    """One request of any kind, redirections followed under the credential rule: the answer,
    its body not read yet (read or close it), when its status is one of `expect`;
    ProbeError otherwise, naming `what` (default "METHOD URL")."""
    what = what or f"{method} {url}"
    response = send(client, build_request(client, method, url, deadline, headers=headers), what)
    if response.status_code not in expect:
        raise status_failure(response, what)
    return response


def http_url(url: str) -> str:
    """`url` with davs:// mapped to https://; other schemes are not ours."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in SCHEMES:
        raise ValueError(f"not an HTTP or WebDAV URL: {url!r}")
    return f"{SCHEMES[scheme.lower()]}://{rest}"


def served_by(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port or DEFAULT_PORTS.get(url.scheme, 0)}"


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


class CredentialAuth(httpx.Auth):
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
        return f"CredentialAuth(origin={self._origin})"  # never the token

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
            auth = CredentialAuth(
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
            follow_redirects=False,  # send() follows them, applying the token rule
            trust_env=False,
            headers=HEADERS,
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
            headers=HEADERS,
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


def build_request(
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


def head(client: httpx.Client, url: httpx.URL | str, deadline: Deadline) -> httpx.URL:
    """A HEAD that must answer 200, its connection kept for the next: the URL that answered."""
    request = build_request(client, "HEAD", url, deadline)
    response = send(client, request, f"HEAD {url}")
    # Read to its (empty) end: httpcore keeps a connection only for a response it saw end,
    # and closing it unread made every HEAD connect again.
    response.read()
    response.close()
    if response.status_code != 200:
        raise status_failure(response, f"HEAD {url}")
    return response.url


def send(client: httpx.Client, request: httpx.Request, what: str = "") -> httpx.Response:
    """Send, following redirections (each hop passes the egress policy at connect time and
    the credential rule in CredentialAuth)."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise request_error(exc, what or what_of(request)) from exc
        if not response.has_redirect_location:
            return response
        response.close()
        request = redirected(client, request, response)
    raise too_many_redirects(what or what_of(request))


async def send_async(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise request_error(exc, what_of(request)) from exc
        if not response.has_redirect_location:
            return response
        await response.aclose()
        request = redirected(client, request, response)
    raise too_many_redirects(what_of(request))


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
            raise request_error(exc, what) from exc
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
            raise request_error(exc, what) from exc
        finally:
            response.close()
    return response.status_code, body[:65536]


def redirected(
    client: httpx.Client | httpx.AsyncClient, request: httpx.Request, response: httpx.Response
) -> httpx.Request:
    """The request a redirection asks for: same method (GET after a 303 to a GET or POST),
    same Range, the time left; never the Authorization of the previous hop."""
    url = request.url.join(response.headers["Location"])
    method = request.method
    if response.status_code not in _REDIRECT_KEEPS_METHOD and method not in ("GET", "HEAD"):
        method = "GET"
    headers = {name: request.headers[name] for name in CARRIED_HEADERS if name in request.headers}
    return client.build_request(method, url, headers=headers, extensions=request.extensions)


def too_many_redirects(what: str) -> ProbeError:
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: more than {MAX_REDIRECTS} redirections")


def status_failure(response: httpx.Response, what: str) -> ProbeError:
    """The error for an unexpected status, quoting the start of the server's explanation."""
    excerpt = b""
    if response.status_code >= 300:
        with contextlib.suppress(httpx.HTTPError):
            excerpt = next(response.iter_raw(), b"")[:200]
    response.close()
    return status_error(response, what, excerpt)


async def body_excerpt_async(response: httpx.Response) -> bytes:
    excerpt = b""
    if response.status_code >= 300:
        with contextlib.suppress(httpx.HTTPError):
            excerpt = await anext(response.aiter_raw(), b"")
    await response.aclose()
    return excerpt[:200]


def status_error(response: httpx.Response, what: str, excerpt: bytes) -> ProbeError:
    status = f"{response.status_code} {response.reason_phrase}"
    if response.status_code == 200 and "Range" in response.request.headers:
        status += " to a Range request: the server ignores Range"
    elif text := excerpt.decode("utf-8", "replace").strip():
        status += f": {text}"
    if response.status_code in (401, 403):
        return ProbeError(ErrorClass.AUTH, f"{what}: {status}")
    if response.status_code in (404, 410):
        return ProbeError(ErrorClass.NOT_FOUND, f"{what}: {status}")
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: {status}")


def request_error(exc: httpx.HTTPError, what: str) -> ProbeError:
    """The ProbeError for a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        return ProbeError(ErrorClass.TIMEOUT, f"{what}: no answer in time ({exc!r})")
    handshake = cause_of(exc, ssl.SSLError)
    if handshake is not None:
        return tls_error(what, handshake)
    if isinstance(exc, httpx.ConnectError):
        return ProbeError(ErrorClass.REFUSED, f"{what}: cannot connect: {exc}")
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: {type(exc).__name__}: {exc}")


def body_error(
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
    return ProbeError(error_class, f"{what_range(url, ranges)}: {detail}", bytes_received=received)


def deadline_error(
    url: httpx.URL, ranges: str, received: int, response: httpx.Response
) -> ProbeError:
    expected = response.headers.get("Content-Length", "?")
    return ProbeError(
        ErrorClass.TIMEOUT,
        f"{what_range(url, ranges)}: deadline passed after {received} of {expected} bytes",
        bytes_received=received,
    )


def answer_error(
    url: httpx.URL, ranges: str, detail: str, error_class: ErrorClass | None = None
) -> ProbeError:
    return ProbeError(
        error_class or ErrorClass.SERVER_ERROR, f"{what_range(url, ranges)}: {detail}"
    )


def what_of(request: httpx.Request) -> str:
    return what_range(request.url, request.headers.get("Range"), request.method)


def what_range(url: httpx.URL, ranges: str | None, method: str = "GET") -> str:
    if ranges is None:
        return f"{method} {url}"
    if len(ranges) > 64:
        ranges = f"{ranges[:48]}... ({ranges.count(',') + 1} ranges)"
    return f"{method} {url} Range {ranges}"


def cause_of(exc: BaseException, kind: type[_E]) -> _E | None:
    """The first exception of `kind` in the chain of causes of `exc`."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, kind):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def first_probe_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    probe_errors, _ = group.split(ProbeError)
    if probe_errors is None:
        return group
    first: BaseException = probe_errors
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
