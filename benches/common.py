"""Shared by the benchmarks: a lab to measure, and a forked worker like the engine's clients."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workers.lab import Lab


@contextlib.contextmanager
def running_lab(
    lab_dir: str | None, profile: str, file_sizes: list[int] | None = None, base_port: int = 26000
) -> Iterator[Lab]:
    """The lab in `lab_dir` if it runs, else a fresh one for the length of the benchmark."""
    if lab_dir:
        lab = Lab(Path(lab_dir))
        if lab.is_running():
            yield lab
            return
    state = Path(tempfile.mkdtemp(prefix="fedprobe-bench-lab-", dir="/tmp"))
    os.chmod(state, 0o755)
    lab = Lab(state, profile=profile, base_port=base_port, file_sizes=file_sizes)
    print(f"starting a {profile} lab in {state} ...", file=sys.stderr)
    lab.up()
    try:
        yield lab
    finally:
        lab.down()


def in_client_process(function: Callable[..., Any], *args: Any) -> Any:
    """Run `function(*args)` in a process forked the way the engine forks its clients."""
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(1) as pool:
        return pool.apply(function, args)


@contextlib.contextmanager
def writable_xrootd(url: str | None) -> Iterator[tuple[str, Path | None]]:
    """(directory URL, local folder or None) to write in: `url` if given (a lab's scratch),
    else an xrootd of the benchmark's own exporting / writable, with server checksums, in
    a folder under /tmp (0755, served as nobody), stopped by its pid after."""
    if url:
        yield url, None
        return
    import pwd
    import re
    import shutil
    import socket
    import subprocess
    import time

    base = Path(tempfile.mkdtemp(prefix="fedprobe-bench-write-", dir="/tmp"))
    base.chmod(0o755)
    for folder in ("data/scratch", "admin", "logs"):
        (base / folder).mkdir(parents=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = base / "xrootd.cfg"
    config.write_text(
        f"xrd.allow host 127.0.0.1\nxrd.network nodnr\nxrd.port {port}\n"
        f"all.adminpath {base / 'admin'}\nall.pidpath {base / 'admin'}\nall.export /\n"
        f"xrootd.chksum adler32\noss.localroot {base / 'data'}\n"
    )
    argv = ["xrootd", "-c", str(config), "-l", str(base / "logs" / "xrootd.log"), "-n", "b"]
    if os.geteuid() == 0:
        argv += ["-R", "nobody"]
        nobody = pwd.getpwnam("nobody")
        for path in (base, *base.rglob("*")):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = base / "logs" / "b" / "xrootd.log"
    try:
        for _ in range(300):
            text = log.read_text(errors="replace") if log.exists() else ""
            if re.search(r"xrootd b@\S+ initialization completed", text):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"xrootd did not start: {log}")
        yield f"root://127.0.0.1:{port}//scratch", base / "data" / "scratch"
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)
