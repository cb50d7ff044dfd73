"""The endpoints a lab offers: what `lab status --json` lists and the engine measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workers.lab.files import LabFile
from workers.lab.paths import LabPaths
from workers.lab.ports import PortLayout
from workers.lab.profiles import Profile

HOST = "127.0.0.1"
RELAYED_SITES = ("local", "near", "far")
FED_SERVERS = ("fed-a", "fed-b")


@dataclass(frozen=True)
class LabEndpoint:
    """One way into the lab: a site's server for one protocol, with the files it serves.

    `file_url(path)` is `url + path` for every protocol: root URLs end in "/" (giving the
    "//" of an absolute XRootD path), the GridFTP URL ends in the data dir (GridFTP paths are
    absolute on the server) and the file URL is the data dir itself.
    """

    name: str
    site: str
    protocol: str
    role: str
    url: str
    rtt_ms: float
    files: tuple[LabFile, ...]

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
        )


def build_endpoints(
    layout: PortLayout,
    profile: Profile,
    paths: LabPaths,
    shared: Sequence[LabFile],
    own: Mapping[str, Sequence[LabFile]],
) -> list[LabEndpoint]:
    """Every endpoint; `own` holds the files only fed-a or fed-b has (listed first there)."""
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


def _root(layout: PortLayout, server: str) -> str:
    return f"root://{HOST}:{layout.port(f'{server}-root')}/"


def _http(layout: PortLayout, site: str) -> str:
    return f"http://{HOST}:{layout.port(f'{site}-http')}"
