"""Where workers may connect: the endpoint egress policy (docs/engine.md, "Egress policy").

Addresses are classified after DNS resolution, so a host name cannot smuggle a forbidden
address past the check:
- forbidden: link-local and cloud metadata addresses, "this network", multicast, broadcast,
  reserved. Never connected to, whatever an administrator allows.
- restricted: loopback and private ranges. Connected to only inside a network the policy
  allows (a site's storage is often on a private network; the lab is on loopback).
- anything else (global addresses): allowed.

An IPv6 address that carries an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96,
6to4 2002::/16, IPv4-compatible ::a.b.c.d) is judged as that IPv4 address too:
::ffff:169.254.169.254 is forbidden.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.protocols import DEFAULT_PORTS

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(*pairs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(cidr), why) for cidr, why in pairs)


# First match names the reason, so the narrow networks come before the wide ones.
FORBIDDEN = _networks(
    ("0.0.0.0/8", "this network"),
    ("169.254.0.0/16", "link-local, cloud metadata"),
    ("100.100.100.200/32", "cloud metadata (Alibaba)"),
    ("168.63.129.16/32", "cloud platform endpoint (Azure WireServer)"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("fd00:ec2::254/128", "cloud metadata (AWS, IPv6)"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
RESTRICTED = _networks(
    ("127.0.0.0/8", "loopback"),
    ("::1/128", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "shared address space"),
    ("198.18.0.0/15", "benchmarking"),
    ("fc00::/7", "unique local"),
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and may reach (IPv4-mapped, NAT64, 6to4,
    the deprecated IPv4-compatible ::a.b.c.d), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or 1 < int(address) < 2**32:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def forbidden_reason(address: IPAddress) -> tuple[IPNetwork, str] | None:
    """The always-forbidden network `address` (or the IPv4 address it carries) is in."""
    for candidate in _judged(address):
        for network, why in FORBIDDEN:
            if candidate in network:
                return network, why
    return None


def parse_networks(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (or single addresses) an administrator allows; ValueError names a bad one."""
    networks = []
    for text in texts:
        try:
            network = ipaddress.ip_network(text.strip())
        except ValueError as exc:
            raise ValueError(f"{text.strip()!r} is not a network like 10.0.0.0/8: {exc}") from None
        for forbidden, why in FORBIDDEN:
            if network.network_address in forbidden and network.broadcast_address in forbidden:
                raise ValueError(f"{network} is always refused ({why}): it cannot be allowed")
        networks.append(network)
    return tuple(networks)


@dataclass(frozen=True)
class EgressPolicy:
    """Which addresses a worker may connect to: global ones, and restricted ones in `allowed`."""

    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, cidrs: Iterable[str]) -> EgressPolicy:
        return cls(parse_networks(cidrs))

    def refusal(self, address: IPAddress) -> str | None:
        """Why `address` may not be connected to, or None when it may."""
        forbidden = forbidden_reason(address)
        if forbidden is not None:
            network, why = forbidden
            return f"{address}, in {network} ({why}), which is always refused"
        for candidate in _judged(address):
            for network, why in RESTRICTED:
                if candidate in network and not self._allows(candidate):
                    return f"{address}, in {network} ({why}), which is not allowed here"
        return None

    def check_host(self, host: str, port: int) -> list[IPAddress]:
        """Resolve `host` and return its addresses, or raise ProbeError (class egress) if any
        of them is refused: a name with one bad address among good ones is refused."""
        addresses = resolve(host, port)
        for address in addresses:
            why = self.refusal(address)
            if why is not None:
                raise ProbeError(
                    ErrorClass.EGRESS, f"refused by egress policy: {host} resolves to {why}"
                )
        return addresses

    def check_url(self, url: str) -> list[IPAddress]:
        """check_host for a URL's host (file:// URLs have none: governed by file roots)."""
        parts = urlsplit(url)
        if parts.scheme.lower() == "file" or not parts.hostname:
            return []
        return self.check_host(parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme, 0))

    def check_server(self, server: str) -> list[IPAddress]:
        """check_host for a `host:port` as served_by names it ([v6]:port for IPv6)."""
        parts = urlsplit(f"//{server}")
        return self.check_host(parts.hostname or server, parts.port or 0)

    def _allows(self, address: IPAddress) -> bool:
        return any(address in network for network in self.allowed)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to for a TCP connection, in the resolver's order."""
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ProbeError(ErrorClass.REFUSED, f"cannot resolve {host}: {exc}") from None
    addresses: dict[IPAddress, None] = {}
    for *_, sockaddr in infos:
        addresses[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    return list(addresses)


def literal_refusal(host: str) -> str | None:
    """Why a host written as an IP address (in any numeric form the resolver accepts, like
    2852039166) is always refused; None for names and for other addresses. Looks nothing up."""
    try:
        numeric = host.strip("[]").split("%", 1)[0]  # fe80::1%eth0: the zone is not needed
        infos = socket.getaddrinfo(numeric, 0, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        forbidden = forbidden_reason(address)
        if forbidden is not None:
            network, why = forbidden
            return f"{address} is in {network} ({why}): workers never connect there"
    return None


def _judged(address: IPAddress) -> tuple[IPAddress, ...]:
    carried = embedded_ipv4(address)
    return (address,) if carried is None else (address, carried)
