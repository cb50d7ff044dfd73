"""http(s):// and davs:// beyond reads: PUT, the server's digest, DELETE, and the WebDAV
metadata requests (HEAD, a one-byte ranged GET, PROPFIND Depth 1), over the reusable HTTP
client (workers/engine/httpclient.py) with the backend's egress and credential rules.

A write is one streaming PUT with the file's Content-Length: the client's write requests
feed its body through a one-slot queue (a request returns once the sender took its bytes:
back-pressure from the socket, as a sync write waits for its acknowledgement), and the close
waits for the server's answer, which is the commit.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from functools import partial
from urllib.parse import unquote, urlsplit
from xml.etree.ElementTree import ParseError

import httpx
from defusedxml import DefusedXmlException, ElementTree

from workers.engine.backends.base import MetadataCall, WritableFile
from workers.engine.backends.digests import WANT_DIGEST, adler32_from_headers
from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.httpclient import exchange, http_url, request_error, send, status_failure

# What a PUT that stored the file answers (XrdHttp: 200 "Created", WebDAV servers 201).
PUT_DONE = (200, 201, 204)
DELETE_DONE = (200, 204)
MULTISTATUS = 207
_DAV_HREF = "{DAV:}href"
# How often a write blocked on a full slot looks whether the sender has failed.
_POLL_S = 0.5
# How long an abandoned PUT may take to drop its connection.
ABORT_WAIT_S = 2.0
# Put in the slot to end the body unfinished.
_ABORT = b"abort"


class _Aborted(Exception):
    """The body's generator ends the request: the write was given up."""


class HttpUpload(WritableFile):
    """One PUT streaming what `write` is given; `close` ends the body and reads the answer."""

    def __init__(self, client: httpx.Client, url: str, size: int, deadline: Deadline) -> None:
        self._url = url
        self._deadline = deadline
        self._slot: queue.Queue[bytes | None] = queue.Queue(maxsize=1)
        self._failure: ProbeError | None = None
        self._answer: httpx.Response | None = None
        request = client.build_request(
            "PUT",
            http_url(url),
            content=self._body(),
            headers={"Content-Length": str(size)},
            timeout=max(0.001, deadline.remaining()),
        )
        self._sender = threading.Thread(
            target=self._send, args=(client, request), name="fedprobe-put", daemon=True
        )
        self._sender.start()
        self.served_by = host_port(url)

    def _body(self) -> Iterator[bytes]:
        while (chunk := self._slot.get()) is not None:
            if chunk is _ABORT:
                raise _Aborted  # httpx drops the request and its connection
            yield chunk

    def _send(self, client: httpx.Client, request: httpx.Request) -> None:
        try:
            response = send(client, request, f"PUT {self._url}")
            try:
                response.read()
            except httpx.HTTPError as exc:
                raise request_error(exc, f"PUT {self._url}") from exc
            self._answer = response
        except ProbeError as exc:
            self._failure = exc
        except httpx.StreamError as exc:  # a redirection would need the body again
            self._failure = ProbeError(ErrorClass.SERVER_ERROR, f"PUT {self._url}: {exc}")
        except _Aborted:
            self._failure = ProbeError(ErrorClass.CANCELLED, f"PUT {self._url}: abandoned")

    def abort(self) -> None:
        """End the PUT unfinished (its connection dropped), so that the server stores
        nothing more of it once the file is deleted."""
        with contextlib.suppress(queue.Empty):
            self._slot.get_nowait()
        with contextlib.suppress(queue.Full):
            self._slot.put_nowait(_ABORT)
        self._sender.join(ABORT_WAIT_S)

    def write(self, offset: int, data: bytes, timeout_s: int) -> None:
        """Hands `data` to the PUT's body; waits on the sender checking the deadline itself
        (in fractions of a second: `timeout_s` is XrdCl's whole seconds)."""
        while True:
            try:
                self._slot.put(data, timeout=_POLL_S)
                return
            except queue.Full:
                self._check_sender("write")

    def _check_sender(self, what: str) -> None:
        if not self._sender.is_alive():
            raise self._failure or ProbeError(
                ErrorClass.SERVER_ERROR, f"PUT {self._url}: the server answered before the end"
            )
        self._deadline.check(f"{what} of {self._url}")

    def close(self) -> None:
        while True:
            try:
                self._slot.put(None, timeout=_POLL_S)
                break
            except queue.Full:
                self._check_sender("close")
        self._sender.join(max(0.0, self._deadline.remaining()))
        if self._sender.is_alive():
            raise ProbeError(ErrorClass.TIMEOUT, f"PUT {self._url}: no answer by the deadline")
        if self._failure is not None:
            raise self._failure
        assert self._answer is not None
        if self._answer.status_code not in PUT_DONE:
            raise status_failure(self._answer, f"PUT {self._url}")


def checksum(client: httpx.Client, url: str, deadline: Deadline) -> str:
    """HEAD asking for the adler32 (digests.py): XrdHttp answers `Digest: adler32=...`
    with `xrootd.chksum adler32` configured, else 405 (class checksum: it cannot say)."""
    what = f"HEAD {url} with {', '.join(WANT_DIGEST)}"
    try:
        response = exchange(client, "HEAD", http_url(url), deadline, headers=WANT_DIGEST, what=what)
    except ProbeError as exc:
        if exc.error_class == ErrorClass.SERVER_ERROR:
            raise ProbeError(ErrorClass.CHECKSUM, exc.message) from None
        raise
    _finish(response, what)
    adler32, why = adler32_from_headers(response.headers)
    if adler32 is None:
        raise ProbeError(ErrorClass.CHECKSUM, f"checksum of {url}: {why}")
    return adler32


def delete(client: httpx.Client, url: str, deadline: Deadline) -> None:
    what = f"DELETE {url}"
    _finish(exchange(client, "DELETE", http_url(url), deadline, expect=DELETE_DONE), what)


def list_names(client: httpx.Client, url: str, deadline: Deadline) -> list[str]:
    """The names in a collection, from a PROPFIND Depth 1 (the collection itself left out).
    The endpoint's XML is parsed by defusedxml: no entity expansion, no external entity."""
    body = _propfind(client, url, deadline)
    own = urlsplit(http_url(url)).path.rstrip("/")
    try:
        hrefs = [e.text or "" for e in ElementTree.fromstring(body).iter(_DAV_HREF)]
    except (ParseError, DefusedXmlException) as exc:
        raise ProbeError(ErrorClass.SERVER_ERROR, f"PROPFIND {url}: not XML: {exc}") from None
    paths = [unquote(urlsplit(href).path).rstrip("/") for href in hrefs]
    return [path.rsplit("/", 1)[-1] for path in paths if path and path != own]


def metadata_call(
    client: httpx.Client, operation: str, url: str, deadline: Deadline
) -> MetadataCall | None:
    """stat: HEAD; open: a GET of the first byte (what a job's open and first read cost
    over HTTP, which has no open); list: PROPFIND Depth 1. None for another operation.
    Each request takes its timeouts from the deadline (httpx's, in fractions of a second),
    not from the whole seconds the storm passes."""
    target = http_url(url)
    requests: dict[str, Callable[[], bytes]] = {
        "stat": partial(_request, client, "HEAD", target, deadline, expect=(200,)),
        "open": partial(
            _request, client, "GET", target, deadline, headers={"Range": "bytes=0-0"}, expect=(206,)
        ),
        "list": partial(_propfind, client, url, deadline),
    }
    request = requests.get(operation)
    if request is None:
        return None

    def call(timeout_s: int) -> bytes:
        return request()

    return call


def _propfind(client: httpx.Client, url: str, deadline: Deadline) -> bytes:
    target = http_url(url)
    return _request(
        client, "PROPFIND", target, deadline, headers={"Depth": "1"}, expect=(MULTISTATUS,)
    )


def _request(
    client: httpx.Client,
    method: str,
    url: str,
    deadline: Deadline,
    *,
    headers: dict[str, str] | None = None,
    expect: tuple[int, ...],
) -> bytes:
    what = f"{method} {url}"
    response = exchange(client, method, url, deadline, headers=headers, expect=expect, what=what)
    return _finish(response, what)


def _finish(response: httpx.Response, what: str) -> bytes:
    """Read the answer to its end (its connection is kept only then) and close it."""
    try:
        return response.read()
    except httpx.HTTPError as exc:
        raise request_error(exc, what) from exc
    finally:
        response.close()


def host_port(url: str) -> str:
    parts = urlsplit(http_url(url))
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.hostname}:{parts.port or default}"
