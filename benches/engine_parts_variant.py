"""Preloaded into the engine's fork server by engine_parts.py: the engine's open-close call,
or its write request, replaced by the variant named in the file FEDPROBE_BENCH_VARIANT_FILE
names, read when a client makes its call or creates its file (before its clock starts).
"engine" leaves the engine alone."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from XRootD import client as xrd
from XRootD.client.flags import OpenFlags

from workers.engine.backends import xroot
from workers.engine.backends.base import MetadataCall, OpenOptions
from workers.engine.deadline import Deadline

_engine_call = xroot.XRootDBackend.metadata_call
_engine_write = xroot.XRootDWritableFile.write


def variant() -> str:
    return Path(os.environ["FEDPROBE_BENCH_VARIANT_FILE"]).read_text().strip()


def _bare_open_close(url: str) -> None:
    """The bare loop's open-close (metadata_bare.py)."""
    f = xrd.File()
    status, _ = f.open(url, OpenFlags.READ)
    assert status.ok, status
    f.close()


def _open_close_without_timeout(url: str, deadline: Deadline) -> None:
    """The engine's open-close (xroot._open_close) without the time left on each call."""
    file = xrd.File()
    status, _ = file.open(url, OpenFlags.READ)
    if not status.ok:
        raise xroot.status_error(status, f"open {url}")
    status, _ = file.close()
    if not status.ok:
        raise xroot.status_error(status, f"close {url}")


def metadata_call(self: Any, operation: str, url: str, options: OpenOptions) -> MetadataCall:
    chosen = variant()
    if operation != "open" or chosen == "engine":
        return _engine_call(self, operation, url, options)
    client_url = self._client_url(url, options)
    if chosen == "bare-call":
        return partial(_bare_open_close, client_url)
    if chosen == "no-timeout":
        return partial(_open_close_without_timeout, client_url, options.deadline)
    raise ValueError(f"unknown variant {chosen!r}")


def _bare_write(self: Any, offset: int, data: bytes) -> None:
    """The bare loop's write request (write_bare.py)."""
    self._file.write(data, offset, len(data))


def _write_without_timeout(self: Any, offset: int, data: bytes) -> None:
    status, _ = self._file.write(data, offset, len(data))
    if not status.ok:
        raise xroot.status_error(status, f"write {len(data)} B at {offset}")


def writable_init(self: Any, url: str, options: OpenOptions) -> None:
    _engine_init(self, url, options)
    chosen = variant()
    if chosen == "bare-call":
        self.write = partial(_bare_write, self)
    elif chosen == "no-timeout":
        self.write = partial(_write_without_timeout, self)
    elif chosen != "engine":
        raise ValueError(f"unknown variant {chosen!r}")


_engine_init = xroot.XRootDWritableFile.__init__

if "FEDPROBE_BENCH_VARIANT_FILE" in os.environ:
    xroot.XRootDBackend.metadata_call = metadata_call  # type: ignore[method-assign]
    xroot.XRootDWritableFile.__init__ = writable_init  # type: ignore[method-assign]
