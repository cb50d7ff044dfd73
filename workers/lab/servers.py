"""Command lines and configuration files of the lab's servers.

Every xrootd and cmsd takes `-n INSTANCE`: an xrootd finds the cmsd of the same instance
through `all.adminpath`, and logs land in LOGS/INSTANCE/. The configs admit loopback
clients only (`xrd.allow`), for xrootd, XrdHttp and cmsd alike.
"""

from __future__ import annotations

import grp
import os
import pwd
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from workers.lab.paths import LabPaths

SERVER_USER = "nobody"
LOOPBACK = "127.0.0.1"
TEST_FILE_EXPORT = "/fedprobe"
FED_EXPORT = "/fed"
# The manager serves once both data servers have subscribed, and clients that come earlier
# retry after 1 s: the defaults hold them 10 s (conwait) and the service 90 s (startup).
# The name the GSI sites' grid-mapfile gives the lab user (acc.authdb grants it the files).
GSI_USER = "labuser"
# Data servers answer checksum queries (root:// `query checksum`, HTTP `Want-Digest`) as WLCG
# sites configure them; without it XRootD answers 3013 and XrdHttp 405 to a HEAD asking one.
CHECKSUM = "xrootd.chksum adler32"
MANAGER_DELAYS = ("cms.delay servers 2 startup 1 service 1 suspend 1", "cms.conwait 1")
# Third-party copy (docs/lab.md "Third-party copy"). XrdHttp's TPC handler answers COPY (pull:
# Source, push: Destination) on the TLS sites' HTTP ports; its outbound TLS trusts xrd.tlsca.
# XrdHttp 5.5.3 loads no handler without HTTPS ("HTTPS functionality was not configured"): the
# anonymous sites' plain http ports are only ever the other side of a copy.
HTTP_TPC = ("http.exthandler xrdtpc libXrdHttpTPC.so", "tpc.trace info")
# XRootD-native TPC on the anonymous sites: the destination's xrootd runs xrdcp to pull; without
# `autorm ... --server` a copy fails "file exists". (A token source cannot be pulled natively:
# "No protocols left"; HTTP-TPC serves the token sites.)
XROOT_TPC = "ofs.tpc autorm pgm /usr/bin/xrdcp --server"
# Where write tests may write: one folder per site under the data root, the only exports
# without r/o (a site's own, so a copy between two sites never has one file at both ends).
SCRATCH_EXPORT = "/scratch"
# xrootd -I: a server of one address family only (the default listens on both).
FAMILY_OPTIONS = {"4": "v4"}


@dataclass(frozen=True)
class ServerProcess:
    """One process of the lab: its name in pid files and messages, and where it logs."""

    name: str
    argv: tuple[str, ...]
    logs: tuple[Path, ...]
    env: tuple[tuple[str, str], ...] = ()
    """Variables set for this process on top of the lab's environment."""


def runs_as_root() -> bool:
    return os.geteuid() == 0


def server_user_ids() -> tuple[int, int]:
    user = pwd.getpwnam(SERVER_USER)
    return user.pw_uid, user.pw_gid


def xrootd(
    paths: LabPaths, instance: str, config: Path, env: Mapping[str, str] | None = None
) -> ServerProcess:
    process = _xrd_program("xrootd", paths, instance, config)
    return replace(process, env=tuple((env or {}).items()))


def token_xrootd(paths: LabPaths, instance: str, config: Path) -> ServerProcess:
    """scitokens-cpp finds its key cache under $XDG_CACHE_HOME (of user nobody, once -R)."""
    return xrootd(paths, instance, config, {"XDG_CACHE_HOME": str(paths.token_cache)})


def cmsd(paths: LabPaths, instance: str, config: Path) -> ServerProcess:
    return _xrd_program("cmsd", paths, instance, config)


def _xrd_program(program: str, paths: LabPaths, instance: str, config: Path) -> ServerProcess:
    argv = [program, "-c", str(config), "-l", str(paths.logs / f"{program}.log"), "-n", instance]
    if runs_as_root():
        argv += ["-R", SERVER_USER]  # xrootd refuses to run as root
    name = f"{program}-{instance}"
    return ServerProcess(
        name, tuple(argv), (paths.server_log(instance, program), paths.output(name))
    )


def gridftp(paths: LabPaths, port: int, data_ports: tuple[int, int]) -> ServerProcess:
    argv = [
        "globus-gridftp-server",
        "-c", str(paths.run / "gridftp.conf"),
        "-aa",
        "-p", str(port),
        "-control-interface", LOOPBACK,
        "-data-interface", LOOPBACK,
        "-port-range", f"{data_ports[0]},{data_ports[1]}",
        "-disable-usage-stats",
        "-rp", f"R{paths.data}",
        "-l", str(paths.logs / "gridftp.log"),
        "-d", "ERROR,WARN,INFO",
    ]  # fmt: skip
    if runs_as_root():
        group = grp.getgrgid(server_user_ids()[1]).gr_name
        argv += ["-anonymous-user", SERVER_USER, "-anonymous-group", group]
    return ServerProcess(
        "gridftp", tuple(argv), (paths.logs / "gridftp.log", paths.output("gridftp"))
    )


def relays(paths: LabPaths) -> ServerProcess:
    argv = (
        sys.executable, "-m", "workers.lab.relay",
        "--config", str(paths.relay_config),
        "--control", str(paths.relay_control),
        "--pid-file", str(relay_ready_file(paths)),
    )  # fmt: skip
    return ServerProcess("relays", argv, (paths.output("relays"),))


def issuer(paths: LabPaths) -> ServerProcess:
    argv = (sys.executable, "-m", "workers.lab.issuer", "--config", str(paths.issuer_config))
    return ServerProcess("issuer", argv, (paths.output("issuer"),))


def relay_ready_file(paths: LabPaths) -> Path:
    """The relay process writes its pid here once every relay listens."""
    return paths.run / "relays.pid"


def data_server_config(paths: LabPaths, root_port: int, http_port: int) -> str:
    return _config(
        paths,
        "all.role server",
        f"xrd.port {root_port}",
        f"xrd.protocol XrdHttp:{http_port} libXrdHttp.so",
        f"all.export {TEST_FILE_EXPORT} r/o",
        CHECKSUM,
        f"oss.localroot {paths.data}",
        *tpc_lines(http=False, xroot=True),
    )


def tpc_lines(*, http: bool, xroot: bool) -> tuple[str, ...]:
    """A site's third-party copy doors: HTTP-TPC, XRootD-native TPC (copies land in the
    site's scratch folder, scratch_config)."""
    return (*(HTTP_TPC if http else ()), *((XROOT_TPC,) if xroot else ()))


@dataclass(frozen=True)
class Tls:
    """The host certificate and key xrootd serves TLS with, and the CA dir it trusts."""

    cert: Path
    key: Path
    ca_dir: Path

    def lines(self) -> tuple[str, ...]:
        # Makes roots:// and https possible; plain root:// stays plain unless the
        # authentication protocol (ztn) needs TLS. XrdHttp takes cert, key and CA from here.
        return (f"xrd.tls {self.cert} {self.key}", f"xrd.tlsca certdir {self.ca_dir}")


def token_server_config(paths: LabPaths, port: int, tls: Tls) -> str:
    """root, roots, http and https on one port; only bearer tokens open anything."""
    return _config(
        paths,
        "all.role server",
        f"xrd.port {port}",
        "xrd.protocol XrdHttp libXrdHttp.so",  # no port: shares the xrootd port
        *tls.lines(),
        "xrootd.seclib libXrdSec.so",
        "sec.protocol ztn",
        "ofs.authorize 1",
        f"acc.authdb {paths.token_authdb}",
        f"ofs.authlib ++ libXrdAccSciTokens.so config={paths.scitokens_config}",
        "http.header2cgi Authorization authz",
        f"all.export {TEST_FILE_EXPORT} r/o",
        CHECKSUM,
        f"oss.localroot {paths.data}",
        *tpc_lines(http=True, xroot=False),
    )


def gsi_server_config(paths: LabPaths, port: int, tls: Tls) -> str:
    """root (gsi) and https (client certificates) on one port; the lab user's proxies read."""
    gsi = (
        f"-certdir:{tls.ca_dir} -cert:{tls.cert} -key:{tls.key} -ca:2 -crl:1 "
        # -crldir defaults to /etc/grid-security/certificates, whatever -certdir says.
        f"-crldir:{tls.ca_dir} -gridmap:{paths.gridmap} -gmapopt:11 -vomsat:0 -dlgpxy:0"
    )
    return _config(
        paths,
        "all.role server",
        f"xrd.port {port}",
        "xrd.protocol XrdHttp libXrdHttp.so",
        *tls.lines(),
        "xrootd.seclib libXrdSec.so",
        f"sec.protocol gsi {gsi}",
        "ofs.authorize 1",
        f"acc.authdb {paths.gsi_authdb}",
        f"http.gridmap {paths.gridmap}",
        f"all.export {TEST_FILE_EXPORT} r/o",
        CHECKSUM,
        f"oss.localroot {paths.data}",
        *tpc_lines(http=True, xroot=False),
    )


def scitokens_config(issuer: str, audience: str) -> str:
    """Tokens of the lab's issuer for `audience`; their scopes name paths from / (base_path),
    so storage.read:/fedprobe opens the test files. Requests without a token pass through to
    acc.authdb, which grants them nothing."""
    return (
        "[Global]\n"
        f"audience = {audience}\n"
        "onmissing = passthrough\n"
        "\n"
        "[Issuer fedprobe-lab]\n"
        f"issuer = {issuer}\n"
        "base_path = /\n"
    )


def token_authdb() -> str:
    return "# fedprobe lab: requests without a token may do nothing (no rule grants them)\n"


def gsi_authdb() -> str:
    # l lookup, r read, i insert (create), w write (overwrite), d delete: what a write test does.
    return f"u {GSI_USER} {TEST_FILE_EXPORT} lr {SCRATCH_EXPORT} lriwd\n"


def scratch_path(site: str) -> str:
    """A site's scratch folder, as clients name it (a directory URL's path)."""
    return f"{SCRATCH_EXPORT}/{site}/"


def scratch_config(site: str) -> str:
    """The lines that make a data server's scratch folder writable (appended to its config:
    everything else it exports stays r/o)."""
    return f"all.export {scratch_path(site)}\n"


def one_family_config(paths: LabPaths, port: int, site: str) -> str:
    """Anonymous root and http on one port, serving the test files and `site`'s scratch."""
    return _config(
        paths,
        "all.role server",
        f"xrd.port {port}",
        "xrd.protocol XrdHttp libXrdHttp.so",
        f"all.export {TEST_FILE_EXPORT} r/o",
        CHECKSUM,
        f"oss.localroot {paths.data}",
    ) + scratch_config(site)


def one_family(process: ServerProcess, family: str) -> ServerProcess:
    """The same xrootd listening on one address family only (`-I v4`)."""
    return replace(process, argv=(*process.argv, "-I", FAMILY_OPTIONS[family]))


def gridmap(dn: str) -> str:
    return f'"{dn}" {GSI_USER}\n'


def manager_config(paths: LabPaths, root_port: int, cmsd_port: int) -> str:
    return _config(
        paths,
        "all.role manager",
        f"all.manager {LOOPBACK}:{cmsd_port}",
        f"xrd.port {root_port} if exec xrootd",
        f"xrd.port {cmsd_port} if exec cmsd",
        f"all.export {TEST_FILE_EXPORT} r/o",
        f"all.export {FED_EXPORT} r/o",
        CHECKSUM,
        *MANAGER_DELAYS,
    )


def fed_server_config(paths: LabPaths, server: str, root_port: int, manager_port: int) -> str:
    return _config(
        paths,
        "all.role server",
        f"all.manager {LOOPBACK}:{manager_port}",
        f"xrd.port {root_port} if exec xrootd",
        f"all.export {TEST_FILE_EXPORT} r/o",
        f"all.export {FED_EXPORT} r/o",
        CHECKSUM,
        f"oss.localroot {paths.fed(server)}",
    )


def xcache_config(paths: LabPaths, root_port: int, origin_port: int) -> str:
    return _config(
        paths,
        f"xrd.port {root_port}",
        f"all.export {TEST_FILE_EXPORT} r/o",
        "ofs.osslib libXrdPss.so",
        f"pss.origin {LOOPBACK}:{origin_port}",
        "pss.cachelib libXrdPfc.so",
        f"oss.localroot {paths.xcache}",
        "pfc.blocksize 1M",
        "pfc.prefetch 0",
        "pfc.ram 1g",  # the least XrdPfc accepts; a ceiling, not an allocation
    )


def _config(paths: LabPaths, *lines: str) -> str:
    common = (
        "# Written by the fedprobe lab. Loopback clients only.",
        f"xrd.allow host {LOOPBACK}",
        "xrd.allow host localhost",
        "xrd.allow host [::1]",
        # No reverse DNS for clients (and cmsd peers): each lookup is a DNS query that a busy
        # VM may lose, and cmsd drops a data server's login while it waits (seen, ~10 s).
        "xrd.network nodnr",
        f"all.adminpath {paths.admin}",
        f"all.pidpath {paths.xrd_pids}",
    )
    return "\n".join((*common, *lines)) + "\n"
