"""HTTP third-party copy (HTTP-TPC, as FTS and gfal2 drive it): one COPY, read as it streams.

What XrdHttpTPC 5.5.3 does, measured on the lab (docs/engine.md, "Third-party copy"):
- A pull is a COPY to the destination with `Source:`, a push a COPY to the source with
  `Destination:`. The other side's token goes in `TransferHeaderAuthorization: Bearer T`,
  which the server doing the copy presents to the other side as `Authorization`.
- The server asked refuses at once with a status: a destination without the right to
  create the file 401 "Unable to create /scratch/x; permission denied" (no token, a read
  token, a read-only path alike); a push's source 401 "Unable to open ...; permission
  denied" or 400 "Unable to open ...; no such file or directory".
- Once it accepted, the answer is 201 whatever happens next. The body streams perf markers
  (`Perf Marker`, `Stripe Bytes Transferred: N`, `RemoteConnections: tcp:IP:PORT` on pulls,
  `End`): the first as the transfer starts, then every 5 s; it ends with `success: Created`
  or `failure: <reason>`, without a newline. The other side's refusal reads `failure: Remote
  side failed with status code 404; error message: "Unable to open ..."` (pull; a push's
  destination gives only the status), an unreachable other side `failure: Couldn't connect
  to server` (curl's words). A failed pull leaves a 0-byte file at the destination.

The copy is ours: httpx (the client of our reads), not gfal2 or davix (docs/engine.md says
why). Our COPY carries the credential of the server it goes to (`_CredentialAuth`, the token
rule of httpclient.py), the other side's token only in TransferHeaderAuthorization.
"""

from __future__ import annotations

import contextlib
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import httpx

from workers.engine.backends.base import OpenOptions
from workers.engine.credentials import Access
from workers.engine.errors import CREDENTIAL_PHASE, ErrorClass, ProbeError
from workers.engine.httpclient import ClientConfig, http_url, request_error
from workers.engine.protocols import SCHEMES

# The line that ends each perf marker, and the fields read from one.
_MARKER_END = "End"
_BYTES = "Stripe Bytes Transferred:"
_REMOTE = "RemoteConnections:"
# The last line: the copy's outcome.
_SUCCESS = "success:"
_FAILURE = "failure:"
# How XrdHttpTPC words a failure of the other side (the one it connected to itself).
_OTHER_SIDE = ("remote side", "couldn't connect", "couldn't resolve", "timeout")


@dataclass
class CopyStream:
    """What the COPY's answer said while it streamed: each perf marker's arrival (seconds on
    the caller's clock) and bytes so far, the other side's connections, the final line."""

    marker_s: array[float] = field(default_factory=lambda: array("d"))
    marker_bytes: array[int] = field(default_factory=lambda: array("q"))
    remote_connections: list[str] = field(default_factory=list)
    outcome: str = ""
    # When the server answered (its status line), on the caller's clock.
    answered_s: float | None = None

    @property
    def start_s(self) -> float | None:
        """When the transfer started: its first perf marker (XrdHttpTPC sends one once it
        has reached the other side), else the answer."""
        return self.marker_s[0] if self.marker_s else self.answered_s


@dataclass(frozen=True)
class Sides:
    """Who is who in one copy: the server we send the COPY to (`active`, which moves the
    bytes) and the other, each with its URL and what it is given."""

    pull: bool
    source: str
    destination: str
    source_access: Access
    destination_access: Access

    @property
    def active_url(self) -> str:
        return self.destination if self.pull else self.source

    @property
    def active_access(self) -> Access:
        return self.destination_access if self.pull else self.source_access

    @property
    def other_access(self) -> Access:
        return self.source_access if self.pull else self.destination_access

    @property
    def active_class(self) -> ErrorClass:
        return ErrorClass.TPC_DESTINATION if self.pull else ErrorClass.TPC_SOURCE

    @property
    def other_class(self) -> ErrorClass:
        return ErrorClass.TPC_SOURCE if self.pull else ErrorClass.TPC_DESTINATION

    def headers(self) -> dict[str, str]:
        other = "Source" if self.pull else "Destination"
        headers = {other: http_url(self.source if self.pull else self.destination)}
        token = self.other_access.bearer_token()
        if token is not None:
            # The token rule of the protocol declarations: a scheme that carries no token
            # (plain http://) carries the other side's neither.
            if not SCHEMES[urlsplit(self.active_url).scheme.lower()].token:
                raise ProbeError(
                    ErrorClass.AUTH,
                    f"the other side's token would go to {self.active_url} in the clear: "
                    "a COPY carrying a token needs https:// or davs://",
                    phase=CREDENTIAL_PHASE,
                )
            headers["TransferHeaderAuthorization"] = f"Bearer {token}"
        return headers


def http_third_party_copy(
    sides: Sides, options: OpenOptions, now: Callable[[], float], stream: CopyStream
) -> None:
    """COPY, then read the markers into `stream` as they arrive; ProbeError (tpc-source or
    tpc-destination) unless the last line says success."""
    what = f"COPY {sides.active_url} ({'pull' if sides.pull else 'push'})"
    config = ClientConfig.of(sides.active_url, replace(options, access=sides.active_access))
    with config.client() as client:
        remaining = options.deadline.remaining()
        if remaining <= 0:
            raise ProbeError(ErrorClass.TIMEOUT, f"{what}: deadline passed before the request")
        request = client.build_request(
            "COPY", http_url(sides.active_url), headers=sides.headers(), timeout=remaining
        )
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise request_error(exc, what) from exc
        with contextlib.closing(response):
            stream.answered_s = now()
            if response.status_code not in (200, 201, 202):
                raise _refusal(response, sides, what)
            _read_markers(response, options, now, stream, what)
    _check_outcome(stream.outcome, sides, what)


def _read_markers(
    response: httpx.Response,
    options: OpenOptions,
    now: Callable[[], float],
    stream: CopyStream,
    what: str,
) -> None:
    """The markers' loop: per line a comparison or two; a marker's arrival and byte count
    appended to two arrays. The deadline is checked as lines come (every 5 s at least)."""
    add_s, add_bytes, ends = stream.marker_s.append, stream.marker_bytes.append, options.deadline.at
    copied, line = 0, ""
    try:
        for line in response.iter_lines():
            if line == _MARKER_END:
                add_s(now())
                add_bytes(copied)
            elif line.startswith(_BYTES):
                copied = int(line[len(_BYTES) :])
            elif line.startswith(_REMOTE) and not stream.remote_connections:
                stream.remote_connections = line[len(_REMOTE) :].split()
            if time.time() > ends:
                raise ProbeError(ErrorClass.TIMEOUT, f"{what}: deadline passed mid-copy")
    except httpx.HTTPError as exc:
        raise request_error(exc, f"{what}: reading its perf markers") from exc
    except ValueError as exc:
        raise ProbeError(ErrorClass.SERVER_ERROR, f"{what}: a perf marker reads {exc}") from None
    stream.outcome = line.strip()


def _check_outcome(outcome: str, sides: Sides, what: str) -> None:
    if outcome.startswith(_SUCCESS):
        return
    if not outcome.startswith(_FAILURE):
        raise ProbeError(
            sides.active_class, f"{what}: the answer ended without success or failure: {outcome!r}"
        )
    reason = outcome[len(_FAILURE) :].strip()
    side = sides.other_class if reason.lower().startswith(_OTHER_SIDE) else sides.active_class
    who = "the source" if side == ErrorClass.TPC_SOURCE else "the destination"
    raise ProbeError(side, f"{what} failed at {who}: {reason}")


def _refusal(response: httpx.Response, sides: Sides, what: str) -> ProbeError:
    """The server asked refused the COPY itself: its side's class, with its words."""
    excerpt = b""
    with contextlib.suppress(httpx.HTTPError):
        excerpt = next(response.iter_raw(), b"")[:200]
    text = excerpt.decode("utf-8", "replace").strip()
    status = f"{response.status_code} {response.reason_phrase}" + (f": {text}" if text else "")
    return ProbeError(sides.active_class, f"{what}: {status}")


def http_delete(url: str, options: OpenOptions) -> None:
    """Remove one file we made (a copy); gone already is fine. XrdHttp needs read and
    modify scopes for it (lab-notes)."""
    what = f"DELETE {url}"
    with ClientConfig.of(url, options).client() as client:
        request = client.build_request(
            "DELETE", http_url(url), timeout=max(1.0, options.deadline.remaining())
        )
        try:
            response = client.send(request)
        except httpx.HTTPError as exc:
            raise request_error(exc, what) from exc
    if response.status_code not in (200, 204, 404):
        raise ProbeError(
            ErrorClass.TPC_DESTINATION,
            f"{what}: {response.status_code} {response.reason_phrase}: {response.text[:200]}",
        )
