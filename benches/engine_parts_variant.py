"""Preloaded into the engine's fork server by engine_parts.py: parts of the engine's client
changed as the variant in the file FEDPROBE_BENCH_VARIANT_FILE names says, read when the
client starts, makes its call or creates its file (before its clock starts). A variant is
"engine" (nothing changed) or parts joined by "+": "bare-call" (the bare loop's open-close,
stat or write request instead of the engine's), "no-timeout" (the engine's call without the time
left on each request), "no-setup" (client_main without its own process group, the die_with
thread, the SIGTERM handler and the credential environment), "no-xrdcl-settings" (XrdCl's
defaults instead of configure_client's)."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

from XRootD import client as xrd
from XRootD.client.flags import OpenFlags

from workers.engine import client as engine_client
from workers.engine.backends import xroot
from workers.engine.backends.base import MetadataCall, OpenOptions
from workers.engine.credentials import Access

_engine_call = xroot.XRootDBackend.metadata_call


PARTS = frozenset({"bare-call", "no-timeout", "no-setup", "no-xrdcl-settings"})


def parts() -> frozenset[str]:
    text = Path(os.environ["FEDPROBE_BENCH_VARIANT_FILE"]).read_text().strip()
    chosen = frozenset() if text == "engine" else frozenset(text.split("+"))
    if not chosen <= PARTS:
        raise ValueError(f"unknown variant {text!r}")
    return chosen


def _bare_open_close(url: str) -> MetadataCall:
    """The bare loop's open-close (metadata_bare.py), called as the engine calls its own."""

    def call(timeout_s: int) -> None:
        f = xrd.File()
        status, _ = f.open(url, OpenFlags.READ)
        assert status.ok, status
        f.close()

    return call


def _open_close_without_timeout(url: str) -> MetadataCall:
    """The engine's open-close (xroot._open_close) without the time left on each request."""

    def call(timeout_s: int) -> None:
        file = xrd.File()
        status, _ = file.open(url, OpenFlags.READ)
        if not status.ok:
            raise xroot.status_error(status, f"open {url}")
        status, _ = file.close()
        if not status.ok:
            raise xroot.status_error(status, f"close {url}")

    return call


def _bare_stat(fs: Any, path: str) -> MetadataCall:
    """The bare loop's stat (metadata_bare.py)."""

    def call(timeout_s: int) -> None:
        status, _ = fs.stat(path)
        assert status.ok, status

    return call


def _stat_without_timeout(fs: Any, path: str, url: str) -> MetadataCall:
    def call(timeout_s: int) -> None:
        status, _ = fs.stat(path)
        if not status.ok:
            raise xroot.status_error(status, f"stat {url}")

    return call


def metadata_call(self: Any, operation: str, url: str, options: OpenOptions) -> MetadataCall:
    chosen = parts()
    if operation not in ("open", "stat") or not chosen & {"bare-call", "no-timeout"}:
        return _engine_call(self, operation, url, options)
    client_url = self._client_url(url, options)
    if operation == "stat":
        fs, path = self._filesystem(client_url), xroot._path_of(client_url)
        if "bare-call" in chosen:
            return _bare_stat(fs, path)
        return _stat_without_timeout(fs, path, url)
    if "bare-call" in chosen:
        return _bare_open_close(client_url)
    return _open_close_without_timeout(client_url)


def _bare_write(self: Any, offset: int, data: bytes, timeout_s: int) -> None:
    """The bare loop's write request (write_bare.py)."""
    self._file.write(data, offset, len(data))


def _write_without_timeout(self: Any, offset: int, data: bytes, timeout_s: int) -> None:
    status, _ = self._file.write(data, offset, len(data))
    if not status.ok:
        raise xroot.status_error(status, f"write {len(data)} B at {offset}")


def writable_init(self: Any, url: str, options: OpenOptions) -> None:
    _engine_init(self, url, options)
    chosen = parts()
    if "bare-call" in chosen:
        self.write = partial(_bare_write, self)
    elif "no-timeout" in chosen:
        self.write = partial(_write_without_timeout, self)


_engine_init = xroot.XRootDWritableFile.__init__
_engine_die_with = engine_client.die_with
_engine_environment = Access.apply_environment
_engine_configure = xroot.configure_client


class _Os:
    """client_main's `os`, whose setpgid does nothing with "no-setup"."""

    def __getattr__(self, name: str) -> Any:
        if name == "setpgid" and "no-setup" in parts():
            return lambda pid, pgid: None
        return getattr(os, name)


class _Signal:
    """client_main's `signal`, whose handlers are not installed with "no-setup"."""

    def __getattr__(self, name: str) -> Any:
        if name == "signal" and "no-setup" in parts():
            return lambda signum, handler: None
        return getattr(signal, name)


def die_with(run_pid: int) -> None:
    if "no-setup" not in parts():
        _engine_die_with(run_pid)


def apply_environment(self: Access, env: Any = os.environ) -> None:
    if "no-setup" not in parts():
        _engine_environment(self, env)


def configure_client(options: OpenOptions) -> None:
    if "no-xrdcl-settings" not in parts():
        _engine_configure(options)


if "FEDPROBE_BENCH_VARIANT_FILE" in os.environ:
    xroot.XRootDBackend.metadata_call = metadata_call  # type: ignore[method-assign]
    xroot.XRootDWritableFile.__init__ = writable_init  # type: ignore[method-assign]
    engine_client.os = _Os()  # type: ignore[assignment]
    engine_client.signal = _Signal()  # type: ignore[assignment]
    engine_client.die_with = die_with
    Access.apply_environment = apply_environment  # type: ignore[method-assign]
    xroot.configure_client = configure_client
