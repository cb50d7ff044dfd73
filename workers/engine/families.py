"""Address families: a run pinned to IPv4 or IPv6, or one run per address of the endpoint's
name; and which family and address a process really connected over, read from the operating
system's own sockets of the process, never from what was asked (docs/engine.md, Address
families): a "passing" IPv6 run that went over IPv4 cannot pass.
"""

from __future__ import annotations

import collections
import ipaddress
import os
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from workers.engine.egress import IPAddress, resolve
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.params import AddressFamily
from workers.engine.protocols import DEFAULT_PORTS

PINNED = frozenset({AddressFamily.IPV4, AddressFamily.IPV6})
# What people call each family, in messages.
NAMES = {AddressFamily.IPV4: "IPv4", AddressFamily.IPV6: "IPv6"}
# What note_connected was told: (peer, port) of each connection made, in order.
_noted: list[tuple[IPAddress, int]] = []


def family_of(address: IPAddress) -> AddressFamily:
    """The family a connection to `address` went over: IPv4 also for an IPv4 address carried
    in an IPv6 one (::ffff:a.b.c.d, what a dual-stack socket shows of an IPv4 peer)."""
    if address.version == 6 and address.ipv4_mapped is None:
        return AddressFamily.IPV6
    return AddressFamily.IPV4


def plain(address: IPAddress) -> IPAddress:
    """`address`, or the IPv4 address it carries (::ffff:127.0.0.1 is 127.0.0.1)."""
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def endpoint_port(url: str) -> int:
    """The port the URL's server listens on (its scheme's default when it names none)."""
    parts = urlsplit(url)
    return parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)


def endpoint_of(urls: Iterable[str]) -> tuple[str, int]:
    """(host, port) of the one server a run's URLs name; InvalidParams when they name
    several (a run per address means one name's addresses)."""
    servers = {((urlsplit(url).hostname or "").lower(), endpoint_port(url)) for url in urls}
    if len(servers) != 1:
        raise InvalidParams(
            "address_family", "'each' probes one endpoint's addresses: give URLs of one server"
        )
    return servers.pop()


def addresses_for(host: str, port: int, family: AddressFamily) -> list[IPAddress]:
    """The addresses of `host` a run of `family` may connect to, in the resolver's order
    (any, each: all of them). A name without one of a pinned family is refused before any
    request: "no IPv6 address for host X (it has 127.0.0.1)"."""
    return pinned(resolve(host, port), host, family)


def pinned(
    addresses: list[IPAddress], host: str, family: str, address: str | None = None
) -> list[IPAddress]:
    """Of the addresses `host` resolved to, those a run of `family` may connect to: all of
    them (any), those of the family, and in a run per address ("each") the run's own address
    when the host has it (a redirection to another host keeps to the family). ProbeError
    refused when none is left."""
    family = AddressFamily(family)
    if family not in PINNED:
        return addresses
    fitting = [a for a in addresses if family_of(a) == family]
    if not fitting:
        has = ", ".join(str(a) for a in addresses)
        raise ProbeError(
            ErrorClass.REFUSED, f"no {NAMES[family]} address for host {host} (it has {has})"
        )
    if address is not None and ipaddress.ip_address(address) in fitting:
        return [ipaddress.ip_address(address)]
    return fitting


def note_connected(server_addr: object) -> None:
    """Remember the peer of a socket this process's own connection code just connected
    (httpcore's stream extra "server_addr": getpeername's (host, port, ...)), for after the
    connection is closed. Once per connection, never per operation."""
    if isinstance(server_addr, tuple) and len(server_addr) >= 2:
        address = ipaddress.ip_address(str(server_addr[0]).split("%", 1)[0])
        _noted.append((plain(address), int(server_addr[1])))


def connected_peers(port: int | None = None) -> list[IPAddress]:
    """The peers of this process's connected TCP sockets (to `port` when given).

    Each socket descriptor of the process (`/proc/self/fd`) is duplicated and asked its peer
    (getpeername, what the kernel connected it to): a millisecond, where reading the kernel's
    connection tables (/proc/net/tcp) takes tens on a busy host. Read after the timed phases.
    Not psutil: not among the engine's dependencies, for the twenty lines it would replace.
    """
    peers: dict[IPAddress, None] = {}
    for fd in _socket_descriptors():
        peer = _peer_of(fd)
        if peer is not None and (port is None or peer[1] == port):
            peers[peer[0]] = None
    return list(peers)


def peer_address(port: int) -> str | None:
    """The address this process is connected to at the endpoint's port (else at any port,
    for a redirect to another port), as text; else the last one its own connection code
    connected to (note_connected: HTTP clients close theirs); None when there is none."""
    noted = [address for address, noted_port in reversed(_noted) if noted_port == port]
    peers = connected_peers(port) or noted or connected_peers() or [a for a, _ in _noted[::-1]]
    return str(peers[0]) if peers else None


def most_common(addresses: Iterable[str | None]) -> str | None:
    """The address most of the clients connected to (None: none did)."""
    counts = collections.Counter(a for a in addresses if a)
    return counts.most_common(1)[0][0] if counts else None


def wrong_family(family: AddressFamily, used: Iterable[tuple[str, str | None]]) -> str | None:
    """What went wrong when a run pinned to `family` connected over another one: `used` are
    (who, address) pairs; None when every address is of the family (or the run is not pinned).
    """
    if family not in PINNED:
        return None
    for who, address in used:
        if address and family_of(ipaddress.ip_address(address)) != family:
            return (
                f"pinned to {NAMES[family]}, but {who} connected to {address} over "
                f"{NAMES[family_of(ipaddress.ip_address(address))]}: the run does not count"
            )
    return None


def _socket_descriptors() -> list[int]:
    descriptors: list[int] = []
    try:
        listed = os.listdir("/proc/self/fd")
    except OSError:
        return descriptors  # no /proc: the run records no address, it does not fail
    for fd in listed:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if target.startswith("socket:["):
            descriptors.append(int(fd))
    return descriptors


def _peer_of(fd: int) -> tuple[IPAddress, int] | None:
    """(address, port) a TCP socket is connected to; None for any other descriptor."""
    try:
        duplicate = os.dup(fd)
    except OSError:
        return None  # closed meanwhile
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        return None
    with sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        if sock.type != socket.SOCK_STREAM:
            return None
        try:
            host, port = sock.getpeername()[:2]
        except OSError:
            return None  # listening, or not connected
    return plain(ipaddress.ip_address(str(host).split("%", 1)[0])), int(port)
