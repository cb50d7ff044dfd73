"""Where a run's credential may be presented, for the protocols whose libraries follow
redirections on their own (XrdCl, xrdcp, globus-url-copy): the endpoint's own server, and the
hosts an administrator listed for the endpoint (RunParams.credential_hosts; docs/engine.md,
"Tokens and redirections").

XrdCl logs in to every server a redirection names and presents the run's token (ztn) or proxy
(gsi) there if that server asks for it; nothing in XrdCl limits where. So the rule is enforced
where the egress policy is:

- by name, in the preflight, for the servers a redirector locates the file on (the message
  then names the host as the redirector wrote it);
- by address, at connect time, in the egress guard: a connection to an address that is
  neither the endpoint's own server nor a listed host's is refused before anything is sent,
  so before any login, whatever sent the client there.

The endpoint's own server is its host at its port (another port of the same host is another
server: a second xrootd there is not the endpoint). A listed name or address counts at any
port. A listed `.suffix` is matched, for an address, by the address's reverse name confirmed
by looking that name up again (forward-confirmed reverse DNS): anyone can make an address's
reverse name say `pool7.example.org`, only example.org's owner can make that name resolve to
the address.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from workers.engine.egress import IPAddress, resolve
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.protocols import DEFAULT_PORTS
from workers.engine.urls import host_listed

Resolver = Callable[[str], list[IPAddress]]
ReverseResolver = Callable[[IPAddress], str | None]
_Resolved = tuple[frozenset[tuple[IPAddress, int]], frozenset[IPAddress]]


@dataclass(frozen=True)
class CredentialScope:
    """The endpoint's own servers (host, port) and the hosts listed for it."""

    servers: tuple[tuple[str, int], ...]
    hosts: tuple[str, ...] = ()
    # GridFTP: the data channel goes to a port the server names, on its own address.
    any_port: bool = False

    @classmethod
    def of(
        cls, urls: Sequence[str], hosts: Sequence[str], *, any_port: bool = False
    ) -> CredentialScope:
        servers: dict[tuple[str, int], None] = {}
        for url in urls:
            parts = urlsplit(url)
            if parts.hostname:
                port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)
                servers[(parts.hostname.lower(), port)] = None
        return cls(tuple(servers), tuple(hosts), any_port)

    def allows(self, host: str, port: int | None) -> bool:
        """Whether the credential may go to `host` (a name or address as written) at `port`
        (None: the server's own, as a redirector names a server without one)."""
        host = host.strip("[]").lower()
        for own_host, own_port in self.servers:
            if host == own_host and (self.any_port or port in (None, own_port)):
                return True
        return host_listed(host, self.hosts)

    def server_refusal(self, server: str) -> str | None:
        """Why the credential may not go to `server` (host:port, as a redirector names it),
        or None when it may."""
        parts = urlsplit(f"//{server}")
        if self.allows(parts.hostname or server, parts.port):
            return None
        return f"{server} is {self.not_in_scope()}"

    def check_server(self, server: str) -> None:
        """ProbeError (class egress) when the credential may not go to `server`."""
        why = self.server_refusal(server)
        if why is not None:
            raise ProbeError(ErrorClass.EGRESS, f"the run's credential may not go there: {why}")

    def not_in_scope(self) -> str:
        """What a refusal says of the rule: the servers and hosts the credential may go to."""
        own = ", ".join(_server(host, port) for host, port in self.servers)
        ports = " (any port)" if self.any_port else ""
        listed = ", ".join(self.hosts) if self.hosts else "none"
        return (
            f"neither the endpoint's own server ({own}{ports}) nor a host listed in its "
            f"credential_hosts ({listed})"
        )


class AddressScope:
    """The scope judged by address, for the egress guard: which (address, port) a guarded
    process may connect to when it carries the run's credential. Names are looked up when
    first needed and once more on a miss (a name may answer with its addresses in turns);
    each verdict is kept for the run."""

    def __init__(
        self,
        scope: CredentialScope,
        resolver: Resolver | None = None,
        reverse: ReverseResolver | None = None,
    ) -> None:
        self.scope = scope
        self._resolve = resolver or _addresses
        self._reverse = reverse or _reverse_name
        self._suffixes = tuple(host for host in scope.hosts if host.startswith("."))
        self._resolved: _Resolved | None = None
        self._verdicts: dict[tuple[IPAddress, int], bool] = {}

    def allows(self, address: IPAddress, port: int) -> bool:
        key = (address, port)
        if key not in self._verdicts:
            self._verdicts[key] = self._allows(address, port)
        return self._verdicts[key]

    def refusal(self, address: IPAddress, port: int) -> str:
        """What a refused connection is told: the address, its reverse name, and the rule."""
        where = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        name = self._reverse(address)
        named = f" ({name})" if name else ""
        return (
            f"refused: a connection to {where}{named}, where the endpoint redirected (or its "
            f"name resolved again), carrying the run's credential: that address is "
            f"{self.scope.not_in_scope()}"
        )

    def _allows(self, address: IPAddress, port: int) -> bool:
        for fresh in (False, True):
            own, listed = self._lookups(fresh)
            if address in listed or (address, port) in own:
                return True
            if self.scope.any_port and any(address == own_address for own_address, _ in own):
                return True
        return bool(self._suffixes) and self._forward_confirmed(address)

    def _lookups(self, fresh: bool) -> _Resolved:
        """(the own servers' addresses and ports, the listed names' addresses)."""
        if self._resolved is None or fresh:
            own = frozenset(
                (address, port)
                for host, port in self.scope.servers
                for address in self._resolve(host)
            )
            listed = frozenset(
                address
                for host in self.scope.hosts
                if not host.startswith(".")
                for address in self._resolve(host)
            )
            self._resolved = (own, listed)
        return self._resolved

    def _forward_confirmed(self, address: IPAddress) -> bool:
        """Whether the address's reverse name is under a listed suffix and resolves to it."""
        name = self._reverse(address)
        if not name or not host_listed(name, self._suffixes):
            return False
        return address in self._resolve(name)


def _addresses(host: str) -> list[IPAddress]:
    """The addresses `host` resolves to (none when it does not resolve: it allows nothing)."""
    try:
        return resolve(host, 0)
    except ProbeError:
        return []


def _reverse_name(address: IPAddress) -> str | None:
    """The address's reverse (PTR or /etc/hosts) name, lower case; None when it has none."""
    try:
        name = socket.gethostbyaddr(str(address))[0]
    except (OSError, UnicodeError):
        return None
    return name.lower().rstrip(".") or None


def _server(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
