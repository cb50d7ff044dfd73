"""An XRootD server's TLS, seen through a handshake of our own.

XrdCl reports a failed TLS handshake as "[FATAL] TLS error" and nothing more, and never says
which TLS version and cipher it negotiated. The preflight therefore asks the server itself:
the XRootD handshake, a kXR_protocol request that wants TLS (as XrdCl sends for roots:// and
for ztn), and, when the server answers kXR_gotoTLS, a TLS handshake with Python's ssl (the
same OpenSSL, verifying against the run's CA folder and the host name). Untimed; one extra
connection per run, to the endpoint's own address as the egress policy passed it.
"""

from __future__ import annotations

import socket
import ssl
import struct

from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.families import PINNED, addresses_for
from workers.engine.params import AddressFamily
from workers.engine.tls import ssl_context, tls_error

# XProtocol.hh: the initial handshake (five network-order ints), kXR_protocol (3006) with
# clientpv 5.2.0, flags kXR_ableTLS | kXR_wantTLS, expect kXR_ExpLogin.
_HANDSHAKE = struct.pack(">5i", 0, 0, 0, 4, 2012)
_PROTOCOL_REQUEST = struct.pack(">2sHiBB10si", b"\x00\x01", 3006, 0x520, 0x06, 0x03, bytes(10), 0)
_RESPONSE_HEADER = struct.Struct(">2sHi")
_GOTO_TLS = 0x40000000
_MAX_BODY = 65536


def negotiate(
    host: str,
    port: int,
    *,
    ca_dir: str | None,
    egress: EgressPolicy | None,
    timeout_s: float,
    family: str = AddressFamily.ANY,
) -> dict[str, str | None] | None:
    """{"version", "cipher"} of a TLS session with the server (over `family` only, when the
    run is pinned to one), None when it offers no TLS; ProbeError class tls (with OpenSSL's
    reason) when its certificate does not verify."""
    what = f"TLS handshake with {host}:{port}"
    with _connect(host, port, egress, timeout_s, what, AddressFamily(family)) as raw:
        try:
            raw.sendall(_HANDSHAKE + _PROTOCOL_REQUEST)
            _read_response(raw)  # the handshake's answer: protocol version, server kind
            status, body = _read_response(raw)
        except (OSError, ValueError):
            return None  # not a server we understand: nothing to say about its TLS
        if status != 0 or len(body) < 8 or not struct.unpack(">i", body[4:8])[0] & _GOTO_TLS:
            return None
        context = ssl_context(ca_dir)
        try:
            with context.wrap_socket(raw, server_hostname=host.strip("[]")) as tls:
                cipher = tls.cipher()
                return {"version": tls.version(), "cipher": cipher[0] if cipher else None}
        except ssl.SSLError as exc:
            raise tls_error(what, exc) from None
        except OSError as exc:
            raise ProbeError(ErrorClass.TLS, f"{what}: {exc}") from None


def _connect(  # noqa: PLR0917 (negotiate's)
    host: str,
    port: int,
    egress: EgressPolicy | None,
    timeout_s: float,
    what: str,
    family: AddressFamily,
) -> socket.socket:
    addresses = [str(a) for a in egress.check_host(host, port)] if egress is not None else [host]
    if family in PINNED:
        fitting = [str(a) for a in addresses_for(host, port, family)]
        addresses = [a for a in fitting if egress is None or a in addresses]
    failure: OSError | None = None
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout=timeout_s)
        except OSError as exc:
            failure = exc
    raise ProbeError(ErrorClass.REFUSED, f"{what}: cannot connect: {failure}")


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    _, status, length = _RESPONSE_HEADER.unpack(_read_exactly(sock, _RESPONSE_HEADER.size))
    if not 0 <= length <= _MAX_BODY:
        raise ValueError(f"a response of {length} bytes")
    return status, _read_exactly(sock, length)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            raise ValueError("the server closed the connection")
        data += piece
    return data
