"""Every protocol the engine speaks, declared once: its URL schemes and their default ports,
the credentials each scheme carries, the operations it supports, how its clients connect,
and the backend class that speaks it (imported only when a URL of the protocol is used, so a
file:// run never loads XRootD or httpx).

What lists schemes reads these declarations: urls.py (the schemes check_url accepts and the
XROOT_SCHEMES, HTTP_SCHEMES, ... sets), backends.backend_for, params.RunParams.validate (a
copy-only protocol, an operation the protocol does not support), credentials.py (how a
credential is presented over a scheme), egress.py (the port a URL without one means), the
driver (the egress guard), the CLI's help and the web application's copy-only checks.
Adding a protocol is a declaration here and its backend module (docs/engine.md, "Adding a
protocol").

This module imports nothing of the engine (urls.py, credentials.py and params.py import it),
so operations and credential methods are written as the values of params.Operation and
credentials.AuthMethod, which are StrEnums: `Operation.READ in protocol.operations` holds.
tests/workers/engine/test_protocols.py checks every value names a member.

`operations` are what a run may ask of the protocol; RunParams.validate refuses any other
(InvalidParams naming `operation`), and so do the web application's campaign checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.engine.backends.base import Backend


@dataclass(frozen=True)
class Scheme:
    """One URL scheme of a protocol."""

    name: str
    # The port a URL without one means (None: file://, which connects nowhere).
    port: int | None
    # Whether a bearer token is presented over it (never over plain http://).
    token: bool = False
    # How an X.509 proxy is presented over it (a credentials.AuthMethod value: "gsi" for
    # XRootD's gsi and GridFTP, "x509" for a TLS client certificate), None: it is not.
    proxy: str | None = None


@dataclass(frozen=True)
class Protocol:
    """A protocol: its schemes, what it can do and how its clients connect."""

    name: str
    # What users call it ("GridFTP"), for messages.
    title: str
    schemes: tuple[Scheme, ...]
    # params.Operation values a run may ask of it.
    operations: frozenset[str]
    # The backend class, imported when called.
    backend: Callable[[], type[Backend]]
    # Read only by copying whole files with the protocol's tool (methods copy and stage,
    # never direct).
    copy_only: bool = False
    # True when a library or tool of the protocol makes connections itself, resolving names
    # and following redirections out of our sight (XrdCl, xrdcp, globus-url-copy): a run
    # with an egress policy then puts its processes under the egress guard. The HTTP
    # backend connects only to addresses it has checked; file:// connects nowhere.
    connects_itself: bool = False
    # Where such a protocol's credential may go on the endpoint's own host: its own port only
    # (another port is another server), or any port (GridFTP: the data channel goes to a port
    # the server names). Listed hosts take any port (credential_scope.py).
    credential_any_port: bool = False
    # Why a run over it cannot be held to one address family (None: it can; docs/engine.md,
    # Address families): RunParams.validate refuses address_family other than "any" then.
    family_refusal: str | None = None

    @property
    def scheme_names(self) -> frozenset[str]:
        return frozenset(scheme.name for scheme in self.schemes)


def _xroot() -> type[Backend]:
    from workers.engine.backends.xroot import XRootDBackend

    return XRootDBackend


def _http() -> type[Backend]:
    from workers.engine.backends.http import HttpBackend

    return HttpBackend


def _gridftp() -> type[Backend]:
    from workers.engine.backends.gridftp import GridFtpBackend

    return GridFtpBackend


def _file() -> type[Backend]:
    from workers.engine.backends.local import LocalBackend

    return LocalBackend


XROOT = Protocol(
    name="xroot",
    title="XRootD",
    schemes=tuple(
        Scheme(name, 1094, token=True, proxy="gsi") for name in ("root", "roots", "xroot", "xroots")
    ),
    # tpc-pull: the destination pulls, as xrdcp --tpc asks it (native XRootD TPC).
    operations=frozenset({"read", "write", "stat", "open", "list", "replay", "tpc-pull"}),
    backend=_xroot,
    connects_itself=True,
)
HTTP = Protocol(
    name="http",
    title="HTTP",
    schemes=(
        Scheme("http", 80),
        Scheme("https", 443, token=True, proxy="x509"),
        Scheme("davs", 443, token=True, proxy="x509"),
    ),
    operations=frozenset(
        {"read", "write", "stat", "open", "list", "replay", "tpc-pull", "tpc-push"}
    ),
    backend=_http,
)
GRIDFTP = Protocol(
    name="gridftp",
    title="GridFTP",
    schemes=(Scheme("gsiftp", 2811, proxy="gsi"), Scheme("ftp", 21)),
    operations=frozenset({"read"}),
    backend=_gridftp,
    copy_only=True,
    connects_itself=True,
    credential_any_port=True,
    family_refusal=(
        "globus-url-copy can only be let use IPv6 (-ipv6), not held to one family, and its "
        "connections end with it: use 'any'"
    ),
)
FILE = Protocol(
    name="file",
    title="local files",
    schemes=(Scheme("file", None),),
    operations=frozenset({"read", "write", "stat", "open", "list"}),
    backend=_file,
    family_refusal="file:// connects nowhere: use 'any'",
)
PROTOCOLS = (XROOT, HTTP, GRIDFTP, FILE)

# Each scheme's declaration and its protocol's (a scheme belongs to one protocol).
SCHEMES: Mapping[str, Scheme] = MappingProxyType(
    {scheme.name: scheme for protocol in PROTOCOLS for scheme in protocol.schemes}
)
_PROTOCOL_OF: Mapping[str, Protocol] = MappingProxyType(
    {scheme.name: protocol for protocol in PROTOCOLS for scheme in protocol.schemes}
)
# The port a URL of each network scheme means when it names none.
DEFAULT_PORTS: Mapping[str, int] = MappingProxyType(
    {name: scheme.port for name, scheme in SCHEMES.items() if scheme.port is not None}
)


def protocol_of(scheme: str) -> Protocol:
    """The protocol of `scheme` (any case); ValueError for a scheme no protocol has."""
    protocol = _PROTOCOL_OF.get(scheme.lower())
    if protocol is None:
        raise ValueError(f"no protocol has scheme {scheme!r}")
    return protocol


def schemes_of(*protocols: Protocol) -> frozenset[str]:
    """The schemes of `protocols` (all of them when none is named)."""
    return frozenset(name for p in protocols or PROTOCOLS for name in p.scheme_names)
