"""The lab's block of BLOCK_SIZE ports, from base port B (default 21000).

    B+0  local-root        B+1  local-http         clients' ports (a relay, or xrootd itself
    B+2  near-root         B+3  near-http          when the site has no added RTT)
    B+4  far-root          B+5  far-http
    B+6  redirector-root   B+7  redirector-cmsd    manager xrootd and cmsd
    B+8  fed-a-root        B+9  fed-b-root         data servers behind the redirector
    B+10 xcache-root       B+11 local-ftp          XCache proxy; GridFTP control port
    B+12 local-root-backend   B+13 local-http-backend   xrootd of a relayed site
    B+14 near-root-backend    B+15 near-http-backend
    B+16 far-root-backend     B+17 far-http-backend
    B+18 local-token       B+19 local-gsi          authenticated sites: xrootd, roots, http
    B+20 near-token        B+21 near-gsi           and https on one port (token: ztn and
    B+22 far-token         B+23 far-gsi            bearer tokens; gsi: X.509 proxies)
    B+24 local-token-backend  B+25 local-gsi-backend  their xrootds when relayed
    B+26 near-token-backend   B+27 near-gsi-backend
    B+28 far-token-backend    B+29 far-gsi-backend
    B+30 issuer            the lab's OAuth2 token issuer (HTTPS)
    B+31 one-family        a server of one address family, started by a test (one_family.py)
    B+32 .. B+63           GridFTP data ports

The cmsd of fed-a and fed-b listen on no fixed port (cmsd servers use an ephemeral one).
"""

from __future__ import annotations

import contextlib
import random
import socket
from dataclasses import dataclass
from pathlib import Path

from workers.lab.errors import LabError, PortTaken

BLOCK_SIZE = 64
FIRST_PORT = 1024

_OFFSETS = {
    "local-root": 0,
    "local-http": 1,
    "near-root": 2,
    "near-http": 3,
    "far-root": 4,
    "far-http": 5,
    "redirector-root": 6,
    "redirector-cmsd": 7,
    "fed-a-root": 8,
    "fed-b-root": 9,
    "xcache-root": 10,
    "local-ftp": 11,
    "local-root-backend": 12,
    "local-http-backend": 13,
    "near-root-backend": 14,
    "near-http-backend": 15,
    "far-root-backend": 16,
    "far-http-backend": 17,
    "local-token": 18,
    "local-gsi": 19,
    "near-token": 20,
    "near-gsi": 21,
    "far-token": 22,
    "far-gsi": 23,
    "local-token-backend": 24,
    "local-gsi-backend": 25,
    "near-token-backend": 26,
    "near-gsi-backend": 27,
    "far-token-backend": 28,
    "far-gsi-backend": 29,
    "issuer": 30,
    "one-family": 31,
}
_FTP_DATA = (32, 63)


@dataclass(frozen=True)
class PortLayout:
    base: int

    def __post_init__(self) -> None:
        if not FIRST_PORT <= self.base <= 65536 - BLOCK_SIZE:
            raise LabError(
                f"base port {self.base} out of range: the lab needs {BLOCK_SIZE} ports "
                f"from it, between {FIRST_PORT} and 65535"
            )

    def port(self, name: str) -> int:
        return self.base + _OFFSETS[name]

    @property
    def last(self) -> int:
        return self.base + BLOCK_SIZE - 1

    @property
    def ftp_data(self) -> tuple[int, int]:
        return self.base + _FTP_DATA[0], self.base + _FTP_DATA[1]

    def named_ports(self) -> dict[int, str]:
        """Every port the lab may listen on, with what it is for."""
        ports = {self.base + offset: name for name, offset in _OFFSETS.items()}
        first, last = self.ftp_data
        ports.update({port: "GridFTP data" for port in range(first, last + 1)})
        return ports


def port_is_free(port: int) -> bool:
    """Could a server bind `port` on every interface (as xrootd does)?

    Connections in TIME_WAIT do not count as taken. Servers set SO_REUSEADDR, which covers
    the TIME_WAIT of connections they accepted, but not of a socket that did not set it: the
    GridFTP server's data connections stay in TIME_WAIT for a minute after `lab down` and
    refuse even a SO_REUSEADDR bind. The GridFTP server passes over such a port of its data
    range, so the port is free as far as the lab is concerned.
    """
    family, address = _wildcard()
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            probe.bind((address, port))
        except OSError:
            return _only_time_wait(port)
    return True


def check_ports_free(layout: PortLayout) -> None:
    for port, purpose in sorted(layout.named_ports().items()):
        if not port_is_free(port):
            raise PortTaken(
                f"port {port} ({purpose}) is already in use: choose another base port "
                f"(--base-port); the lab uses {layout.base}-{layout.last}"
            )


# Blocks this process has handed out: never handed out again, so that a lab started right
# after another (a test after a test) cannot meet what the one before left on its ports.
_handed_out: set[int] = set()


def free_base_port(low: int = 22000, high: int = 32000, tries: int = 50) -> int:
    """A base port whose whole block is free, picked at random in [low, high) among the
    blocks this process has not handed out before."""
    blocks = [
        base
        for base in range(low - low % BLOCK_SIZE + BLOCK_SIZE, high - BLOCK_SIZE, BLOCK_SIZE)
        if base not in _handed_out
    ]
    for base in random.sample(blocks, min(tries, len(blocks))):
        layout = PortLayout(base)
        if all(port_is_free(port) for port in layout.named_ports()):
            _handed_out.add(base)
            return base
    raise LabError(f"no free block of {BLOCK_SIZE} ports between {low} and {high}")


def _wildcard() -> tuple[socket.AddressFamily, str]:
    if socket.has_ipv6:
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET6, socket.SOCK_STREAM):
            return socket.AF_INET6, "::"
    return socket.AF_INET, "0.0.0.0"


_PROC_TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_TCP_TIME_WAIT = "06"


def _only_time_wait(port: int) -> bool:
    """Are all of this host's TCP sockets on local port `port` in TIME_WAIT?

    False where the kernel's tables cannot be read: then the failed bind is all we know.
    """
    states = []
    try:
        for table in _PROC_TCP_TABLES:
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    states.append(fields[3])
    except (OSError, IndexError, ValueError):
        return False
    return bool(states) and all(state == _TCP_TIME_WAIT for state in states)
