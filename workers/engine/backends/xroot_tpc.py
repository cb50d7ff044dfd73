"""XRootD's own third-party copy (root:// to root://, pulled by the destination server).

Through the bindings' CopyProcess with thirdparty="only" rather than `xrdcp --tpc only` as a
subprocess: the same XrdCl job without a process to start (16 MiB over a 5 MB/s link: 4.0 s
against xrdcp's 5.6 s; 256 MiB unlimited: both 2.54 s; docs/benchmarks.md). The
servers need `ofs.tpc ... pgm xrdcp --server` (docs/lab.md); there are no perf markers: the
rate is the size over the time.

XrdCl says which side failed: a destination's error ends in "(destination)" ("[3005] Unable
to create /fedprobe/x; file path marked read/only (destination)", "[FATAL] Connection error:
(destination)"); the source's has no suffix ("[3011] Unable to open ...; no such file").
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from XRootD import client as xrd

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.xroot import configure_client
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.urls import with_user

_DESTINATION_SUFFIX = "(destination)"
_NOT_FOUND = 3011  # kXR_NotFound


def xroot_third_party_copy(source: str, destination: str, options: OpenOptions) -> None:
    """Copy `source` to `destination` (which must not exist); ProbeError tpc-source or
    tpc-destination naming XrdCl's reason."""
    configure_client(options)
    seconds = options.deadline.timeout_s()
    process: Any = xrd.CopyProcess()
    process.add_job(
        with_user(source, options.user),
        with_user(destination, options.user),
        thirdparty="only",
        force=False,
        tpctimeout=seconds,
        cptimeout=seconds,
    )
    status = process.prepare()
    if not status.ok:
        raise _failure(status, source, destination)
    status, results = process.run()
    job = results[0]["status"] if results else status
    if not status.ok or not job.ok:
        raise _failure(job if not job.ok else status, source, destination)


def _failure(status: Any, source: str, destination: str) -> ProbeError:
    message = str(status.message).strip()
    if message.endswith(_DESTINATION_SUFFIX):
        error_class = ErrorClass.TPC_DESTINATION
    else:
        error_class = ErrorClass.TPC_SOURCE
    return ProbeError(error_class, f"TPC {source} -> {destination}: {message}")


def xroot_delete(url: str, options: OpenOptions) -> None:
    """Remove one file we made (a copy); gone already (3011) is fine."""
    client_url = with_user(url, options.user)
    parts = urlsplit(client_url)
    fs = xrd.FileSystem(f"{parts.scheme}://{parts.netloc}")
    status, _ = fs.rm("/" + parts.path.lstrip("/"), timeout=max(1, options.deadline.timeout_s()))
    if not status.ok and status.errno != _NOT_FOUND:
        raise ProbeError(ErrorClass.TPC_DESTINATION, f"rm {url}: {status.message.strip()}")
