"""A server of one address family only, beside a running lab: what a test needs to show that
a run says which family it used, and fails rather than falls back when pinned to the other.

    with one_family_server(lab, "4") as endpoint:   # root://127.0.0.1:<base+31>/, IPv4 only
        ...

xrootd listens on one dual-stack socket by default; `xrootd -I v4` listens on 127.0.0.1 only.
An IPv6-only xrootd needs `net.ipv6.bindv6only=1`, a setting of the whole network namespace
(a server in its own `unshare -n` is out of the tests' reach), so only "4" is offered.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from workers.lab import processes, readiness, servers
from workers.lab.endpoints import HOST, LabEndpoint
from workers.lab.errors import LabError
from workers.lab.files import LabFile
from workers.lab.lab import Lab
from workers.lab.ports import PortLayout

FAMILIES = tuple(servers.FAMILY_OPTIONS)
_SITE = "local"
_READY_TIMEOUT_S = 30.0
_POLL_S = 0.05


@contextlib.contextmanager
def one_family_server(lab: Lab, family: str = "4") -> Iterator[LabEndpoint]:
    """An anonymous xrootd + XrdHttp (one port, the lab's base + 31) that listens on `family`
    only, serves the lab's test files and writes to the local site's scratch folder. One at a
    time per lab; stopped when the block ends."""
    if family not in servers.FAMILY_OPTIONS:
        raise LabError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    # The running lab's block (a Lab built for its dir alone does not know its base port).
    paths, port = lab.paths, PortLayout(int(str(lab.state()["base_port"]))).port("one-family")
    files = lab.endpoint(f"{_SITE}-root").files
    name = f"one-family-v{family}"
    config = paths.config(name)
    config.write_text(servers.one_family_config(paths, port, _SITE))
    config.chmod(0o644)
    process = servers.one_family(servers.xrootd(paths, name, config), family)
    # Its readiness is read from its log: not from the one of an earlier start.
    paths.server_log(name, "xrootd").unlink(missing_ok=True)
    env = readiness.client_env(dict(process.env))
    pid = processes.spawn(process, paths.pids, paths.output(process.name), paths.home, env)
    try:
        _wait_ready(lab, process.name, pid, port, files[0])
        yield LabEndpoint(
            name=name,
            site=_SITE,
            protocol="root",
            role="data",
            url=f"root://{HOST}:{port}/",
            rtt_ms=0.0,
            files=files,
            ca_dir=str(lab.ca_dir()),
            scratch_path=servers.scratch_path(_SITE),
            families=(family,),
        )
    finally:
        processes.stop([pid], f"{paths.run}/")
        (paths.pids / f"{process.name}.pid").unlink(missing_ok=True)


def _wait_ready(lab: Lab, name: str, pid: int, port: int, probe_file: LabFile) -> None:
    instance = name.removeprefix("xrootd-")
    probes = (
        readiness.initialized(lab.paths.server_log(instance, "xrootd"), "xrootd"),
        readiness.xrootd_stat(port, probe_file.path, probe_file.size),
    )
    deadline = time.monotonic() + _READY_TIMEOUT_S
    marker = f"{lab.paths.run}/"
    for probe in probes:
        while (reason := probe()) is not None:
            if not processes.is_alive(pid, marker):
                raise LabError(f"{name} exited: see {lab.paths.output(name)}")
            if time.monotonic() > deadline:
                raise LabError(f"{name} not ready after {_READY_TIMEOUT_S:g} s: {reason}")
            time.sleep(_POLL_S)
