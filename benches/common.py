"""Shared by the benchmarks: a lab to measure, and a forked worker like the engine's clients."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import statistics
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


# The CPUs this benchmark may use, before pin_apart narrowed them.
_CPUS = frozenset(os.sched_getaffinity(0))


@contextlib.contextmanager
def trial_servers(
    url: str | None, *, pin: bool, per_trial: bool
) -> Iterator[Callable[[], contextlib.AbstractContextManager[tuple[str, Path | None]]]]:
    """What each trial measures against, as a context each trial enters: one writable xrootd
    for the whole benchmark, or with `per_trial` a fresh one per trial (writable_xrootd).
    On this 2-core VM a server's placement and state stay with it: medians of 101 trials
    against one server moved by 4-8% from one server to the next (docs/benchmarks.md), more
    than their intervals said; a server per trial spreads that over the trials, so that the
    interval of the median includes it."""
    if per_trial or url:
        yield lambda: writable_xrootd(url, pin=pin)
        return
    with writable_xrootd(None, pin=pin) as shared:
        yield lambda: contextlib.nullcontext(shared)


@contextlib.contextmanager
def writable_xrootd(url: str | None, *, pin: bool = False) -> Iterator[tuple[str, Path | None]]:
    """(directory URL, local folder or None) to write in: `url` if given (a lab's scratch),
    else an xrootd of the benchmark's own exporting / writable, with server checksums, in
    a folder under /tmp (0755, served as nobody), stopped by its pid after. With `pin`, the
    server's threads run on CPU 0 and this process and the ones it starts on the others
    (pin_apart)."""
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
        if pin:
            pin_apart(server.pid)
        yield f"root://127.0.0.1:{port}//scratch", base / "data" / "scratch"
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def pin_apart(server_pid: int) -> None:
    """The server's threads on CPU 0, this process (and what it forks from now on: the
    engine's fork server and clients, the bare loop's) on the other CPUs. On a small
    machine where the client's and the server's threads land moves a loopback ping-pong's
    rate by more than the 2% an engine-vs-bare comparison must resolve (docs/benchmarks.md);
    fixed, both sides meet the same placement. Threads the server starts later inherit
    CPU 0 from the thread that starts them."""
    cpus = _CPUS
    if len(cpus) < 2 or 0 not in cpus:
        raise SystemExit("--pin needs CPU 0 and at least one other CPU")
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {0})
    os.sched_setaffinity(0, cpus - {0})


def ratio_summary(ratios: list[float]) -> str:
    """ "median (IQR q1-q3; 95% CI lo-hi)" of per-trial ratios. The interval is the median's,
    distribution-free (order statistics around rank n/2 +- 1.96 sqrt(n)/2): with wall-clock
    trials that swing by +-10% on a small shared machine, it says whether the trials resolve
    a 2% difference at all. Fewer than 6 trials give no interval."""
    ordered = sorted(ratios)
    n = len(ordered)
    median = statistics.median(ordered)
    q1, _, q3 = statistics.quantiles(ordered, n=4) if n > 1 else (median, median, median)
    text = f"{median:.1%} (IQR {q1:.0%}-{q3:.0%}"
    if n < 6:
        return text + ")"
    half_width = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half_width) - 1)
    high = min(n - 1, math.ceil(n / 2 + half_width))
    return text + f"; 95% CI {ordered[low]:.1%}-{ordered[high]:.1%})"


def order_summary(ratios: list[float]) -> str:
    """The median ratio of the trials in which the engine went first (the even ones, as the
    benches alternate) and of those in which the bare loop did: far apart, the second
    process of a trial meets a server (or a machine) changed by the first."""
    first, second = ratios[0::2], ratios[1::2]
    if not first or not second:
        return ""
    return (
        f"engine first {statistics.median(first):.1%} ({len(first)}), "
        f"bare first {statistics.median(second):.1%} ({len(second)})"
    )
