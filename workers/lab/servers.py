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
from dataclasses import dataclass
from pathlib import Path

from workers.lab.paths import LabPaths

SERVER_USER = "nobody"
LOOPBACK = "127.0.0.1"
TEST_FILE_EXPORT = "/fedprobe"
FED_EXPORT = "/fed"
# The manager serves once both data servers have subscribed, and clients that come earlier
# retry after 1 s: the defaults hold them 10 s (conwait) and the service 90 s (startup).
MANAGER_DELAYS = ("cms.delay servers 2 startup 1 service 1 suspend 1", "cms.conwait 1")


@dataclass(frozen=True)
class ServerProcess:
    """One process of the lab: its name in pid files and messages, and where it logs."""

    name: str
    argv: tuple[str, ...]
    logs: tuple[Path, ...]


def runs_as_root() -> bool:
    return os.geteuid() == 0


def server_user_ids() -> tuple[int, int]:
    user = pwd.getpwnam(SERVER_USER)
    return user.pw_uid, user.pw_gid


def xrootd(paths: LabPaths, instance: str, config: Path) -> ServerProcess:
    return _xrd_program("xrootd", paths, instance, config)


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
        f"oss.localroot {paths.data}",
    )


def manager_config(paths: LabPaths, root_port: int, cmsd_port: int) -> str:
    return _config(
        paths,
        "all.role manager",
        f"all.manager {LOOPBACK}:{cmsd_port}",
        f"xrd.port {root_port} if exec xrootd",
        f"xrd.port {cmsd_port} if exec cmsd",
        f"all.export {TEST_FILE_EXPORT} r/o",
        f"all.export {FED_EXPORT} r/o",
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
        f"all.adminpath {paths.admin}",
        f"all.pidpath {paths.xrd_pids}",
    )
    return "\n".join((*common, *lines)) + "\n"
