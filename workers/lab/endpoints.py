"""The endpoints a lab offers: what `lab status --json` lists and the engine measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from workers.lab.files import LabFile
from workers.lab.paths import LabPaths
from workers.lab.ports import PortLayout
from workers.lab.profiles import Profile
from workers.lab.relay import has_ipv6_loopback
from workers.lab.servers import scratch_path

HOST = "127.0.0.1"
# XrdSecgsi's client checks the server certificate's CN (not its SAN) against the URL's host.
GSI_HOST = "localhost"
RELAYED_SITES = ("local", "near", "far")
FED_SERVERS = ("fed-a", "fed-b")
# The sites whose doors (anonymous, token, GSI) take writes, each in its own scratch folder.
SCRATCH_SITES = RELAYED_SITES
# Address families, as RunParams.address_family names them: xrootd and the relays listen on
# 127.0.0.1 and ::1; the GridFTP server on 127.0.0.1 only.
BOTH_FAMILIES = ("4", "6")
Auth = Literal["none", "token", "x509"]
AUTH_KINDS: tuple[Auth, ...] = ("none", "token", "x509")


@dataclass(frozen=True)
class LabEndpoint:
    """One way into the lab: a site's server for one protocol, with the files it serves.

    `file_url(path)` is `url + path` for every protocol: root URLs end in "/" (giving the
    "//" of an absolute XRootD path), the GridFTP URL ends in the data dir (GridFTP paths are
    absolute on the server) and the file URL is the data dir itself.

    `auth` is what a client must present: nothing, a bearer token (WLCG profile, from the
    lab's issuer) or an X.509 proxy of the lab's CA. `tls` says whether the connection is
    encrypted; `ca_dir` is the lab's CA dir (X509_CERT_DIR), the same for every endpoint.
    `bandwidth_mbps` is the rate of the site's link in MB/s, shared by every connection to
    any of the site's endpoints (None: unlimited). `scratch_path` is the folder under which
    writes may go (a directory path: `file_url(scratch_path)` is its URL; None: the endpoint
    takes no writes); `families` the address families it listens on ("4": 127.0.0.1, "6":
    ::1), whatever family its URL's host names.
    """

    name: str
    site: str
    protocol: str
    role: str
    url: str
    rtt_ms: float
    files: tuple[LabFile, ...]
    tls: bool = False
    auth: Auth = "none"
    ca_dir: str = ""
    bandwidth_mbps: float | None = None
    scratch_path: str | None = None
    families: tuple[str, ...] = BOTH_FAMILIES
    # The third-party copies the endpoint performs: "http" (it answers HTTP-TPC's COPY: pulls
    # to it, pushes from it) and "root" (XRootD-native, `xrdcp --tpc`, pulls to it). Any
    # HTTP endpoint can be the other side of a copy; copies land under /scratch (docs/lab.md
    # "Third-party copy").
    tpc: tuple[str, ...] = ()

    def file_url(self, path: str) -> str:
        return self.url + "/" + path.lstrip("/")

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "site": self.site,
            "protocol": self.protocol,
            "role": self.role,
            "url": self.url,
            "rtt_ms": self.rtt_ms,
            "files": [f.to_json() for f in self.files],
            "tls": self.tls,
            "auth": self.auth,
            "ca_dir": self.ca_dir,
            "bandwidth_mbps": self.bandwidth_mbps,
            "scratch_path": self.scratch_path,
            "families": list(self.families),
            "tpc": list(self.tpc),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> LabEndpoint:
        files = data["files"]
        assert isinstance(files, list)
        return cls(
            name=str(data["name"]),
            site=str(data["site"]),
            protocol=str(data["protocol"]),
            role=str(data["role"]),
            url=str(data["url"]),
            rtt_ms=float(str(data["rtt_ms"])),
            files=tuple(LabFile.from_json(f) for f in files),
            tls=data.get("tls") is True,
            auth=_auth(data.get("auth", "none")),
            ca_dir=str(data.get("ca_dir", "")),
            bandwidth_mbps=_bandwidth(data.get("bandwidth_mbps")),
            scratch_path=_optional_str(data.get("scratch_path")),
            families=tuple(str(family) for family in _list(data.get("families", BOTH_FAMILIES))),
            tpc=tuple(str(mode) for mode in _list(data.get("tpc", []))),
        )


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def _list(value: object) -> list[object] | tuple[object, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"families must be a list, got {value!r}")
    return value


def _bandwidth(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"bandwidth_mbps must be a number or null, got {value!r}")
    return float(value)


def _auth(value: object) -> Auth:
    for kind in AUTH_KINDS:
        if value == kind:
            return kind
    raise ValueError(f"unknown auth {value!r}: one of {', '.join(AUTH_KINDS)}")


def build_endpoints(
    layout: PortLayout,
    profile: Profile,
    paths: LabPaths,
    shared: Sequence[LabFile],
    own: Mapping[str, Sequence[LabFile]],
    *,
    ca_dir: Path,
) -> list[LabEndpoint]:
    """Every endpoint; `own` holds the files only fed-a or fed-b has (listed first there)."""
    endpoints = _anonymous_endpoints(layout, profile, paths, shared, own)
    endpoints += _authenticated_endpoints(layout, profile, tuple(shared))
    return [
        replace(
            endpoint,
            ca_dir=str(ca_dir),
            bandwidth_mbps=_link_rate(profile, endpoint),
            scratch_path=_scratch(endpoint),
            families=_families(endpoint),
            tpc=_tpc_modes(endpoint),
        )
        for endpoint in endpoints
    ]


def _tpc_modes(endpoint: LabEndpoint) -> tuple[str, ...]:
    """The sites' doors that copy (servers.tpc_lines): HTTP-TPC on the TLS sites' HTTP
    ports, native TPC on the anonymous sites' root ports (gsi and ztn cannot delegate it)."""
    if endpoint.site not in RELAYED_SITES:
        return ()
    if endpoint.protocol in ("https", "davs"):
        return ("http",)
    if endpoint.protocol == "root" and endpoint.auth == "none":
        return ("root",)
    return ()


def _scratch(endpoint: LabEndpoint) -> str | None:
    """Every door of a site writes to its scratch folder; the federation, the cache, file://
    and GridFTP take no writes."""
    if endpoint.site in SCRATCH_SITES and endpoint.protocol not in ("file", "ftp"):
        return scratch_path(endpoint.site)
    return None


def _families(endpoint: LabEndpoint) -> tuple[str, ...]:
    if endpoint.protocol == "file":
        return ()
    if endpoint.protocol == "ftp" or not has_ipv6_loopback():
        return ("4",)
    return BOTH_FAMILIES


def _link_rate(profile: Profile, endpoint: LabEndpoint) -> float | None:
    """The cap of the site's link for its relayed endpoints; the others are unlimited (file
    and GridFTP are not relayed, the federation and the cache have no link of their own)."""
    if endpoint.site in RELAYED_SITES and endpoint.protocol not in ("file", "ftp"):
        return profile.bandwidth(endpoint.site)
    return None


def _anonymous_endpoints(
    layout: PortLayout,
    profile: Profile,
    paths: LabPaths,
    shared: Sequence[LabFile],
    own: Mapping[str, Sequence[LabFile]],
) -> list[LabEndpoint]:
    endpoints = []
    files = tuple(shared)
    for site in RELAYED_SITES:
        rtt = profile.rtt_ms[site]
        endpoints += [
            LabEndpoint(f"{site}-root", site, "root", "data", _root(layout, site), rtt, files),
            LabEndpoint(f"{site}-http", site, "http", "data", _http(layout, site), rtt, files),
        ]
    ftp = f"ftp://{HOST}:{layout.port('local-ftp')}{paths.data}"
    fed_files = tuple(f for server in FED_SERVERS for f in own[server])
    endpoints += [
        LabEndpoint("local-file", "local", "file", "data", f"file://{paths.data}", 0.0, files),
        LabEndpoint("local-ftp", "local", "ftp", "data", ftp, 0.0, files),
        LabEndpoint(
            name="redirector-root",
            site="federation",
            protocol="root",
            role="redirector",
            url=_root(layout, "redirector"),
            rtt_ms=0.0,
            files=fed_files + files,
        ),
    ]
    for server in FED_SERVERS:
        mine = tuple(own[server]) + files
        endpoints.append(
            LabEndpoint(f"{server}-root", server, "root", "data", _root(layout, server), 0.0, mine)
        )
    endpoints.append(
        LabEndpoint("xcache-root", "xcache", "root", "cache", _root(layout, "xcache"), 0.0, files)
    )
    return endpoints


def _authenticated_endpoints(
    layout: PortLayout, profile: Profile, files: tuple[LabFile, ...]
) -> list[LabEndpoint]:
    """Per site a token site (roots, https) and a GSI site (root with gsi, https with a client
    certificate): each serves xroot and HTTP on one port."""
    endpoints = []
    for site in RELAYED_SITES:
        rtt = profile.rtt_ms[site]
        token, gsi = layout.port(f"{site}-token"), layout.port(f"{site}-gsi")
        endpoints += [
            LabEndpoint(
                f"{site}-roots", site, "roots", "data", f"roots://{HOST}:{token}/", rtt, files,
                tls=True, auth="token",
            ),
            LabEndpoint(
                f"{site}-https", site, "https", "data", f"https://{HOST}:{token}", rtt, files,
                tls=True, auth="token",
            ),
            LabEndpoint(
                f"{site}-gsi-root", site, "root", "data", f"root://{GSI_HOST}:{gsi}/", rtt, files,
                tls=False, auth="x509",
            ),
            LabEndpoint(
                f"{site}-gsi-https", site, "https", "data", f"https://{GSI_HOST}:{gsi}", rtt,
                files, tls=True, auth="x509",
            ),
        ]  # fmt: skip
    davs = f"davs://{HOST}:{layout.port('local-token')}"
    rtt = profile.rtt_ms["local"]
    endpoints.append(
        LabEndpoint("local-davs", "local", "davs", "data", davs, rtt, files, tls=True, auth="token")
    )
    return endpoints


def issuer_url(layout: PortLayout) -> str:
    """The `iss` of the lab's tokens, and where its issuer answers."""
    return f"https://{HOST}:{layout.port('issuer')}"


def _root(layout: PortLayout, server: str) -> str:
    return f"root://{HOST}:{layout.port(f'{server}-root')}/"


def _http(layout: PortLayout, site: str) -> str:
    return f"http://{HOST}:{layout.port(f'{site}-http')}"
