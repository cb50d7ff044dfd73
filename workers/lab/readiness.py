"""Real readiness probes: a probe returns None once its server answers, else why not yet."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from workers.lab.relay import control

Probe = Callable[[], str | None]

LOOPBACK = "127.0.0.1"
_PROBE_TIMEOUT_S = 5.0
# xrdfs gives up quickly instead of XrdCl's default 1800 s request timeout and 120 s window.
_XRDFS_ENV = {
    "XRD_REQUESTTIMEOUT": "10",
    "XRD_STREAMTIMEOUT": "10",
    "XRD_CONNECTIONWINDOW": "5",
    "XRD_CONNECTIONRETRY": "1",
}


def tcp_listens(port: int) -> Probe:
    def probe() -> str | None:
        try:
            socket.create_connection((LOOPBACK, port), timeout=_PROBE_TIMEOUT_S).close()
        except OSError as exc:
            return f"port {port}: {exc}"
        return None

    return probe


def path_exists(path: Path) -> Probe:
    def probe() -> str | None:
        return None if path.exists() else f"{path} does not exist yet"

    return probe


def xrootd_stat(port: int, path: str, size: int) -> Probe:
    """`xrdfs stat` in a child process: nothing of XrdCl stays behind in this one."""

    def probe() -> str | None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XRD_")} | _XRDFS_ENV
        try:
            done = subprocess.run(
                ["xrdfs", f"root://{LOOPBACK}:{port}", "stat", path],
                capture_output=True,
                text=True,
                env=env,
                timeout=20,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"xrdfs stat root://{LOOPBACK}:{port}/{path}: no answer in 20 s"
        if done.returncode != 0 or f"Size:   {size}\n" not in done.stdout:
            answer = (done.stderr or done.stdout).strip()
            return f"xrdfs stat root://{LOOPBACK}:{port}/{path}: {answer}"
        return None

    return probe


def http_head(port: int, path: str, size: int) -> Probe:
    def probe() -> str | None:
        conn = http.client.HTTPConnection(LOOPBACK, port, timeout=_PROBE_TIMEOUT_S)
        try:
            conn.request("HEAD", path)
            response = conn.getresponse()
            length = response.getheader("Content-Length")
        except (OSError, http.client.HTTPException) as exc:
            return f"HEAD http://{LOOPBACK}:{port}{path}: {exc}"
        finally:
            conn.close()
        if response.status != 200 or length != str(size):
            return f"HEAD http://{LOOPBACK}:{port}{path}: {response.status}, length {length}"
        return None

    return probe


def ftp_banner(port: int) -> Probe:
    def probe() -> str | None:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=_PROBE_TIMEOUT_S) as sock:
                banner = sock.recv(512)
                sock.sendall(b"QUIT\r\n")
        except OSError as exc:
            return f"GridFTP port {port}: {exc}"
        return None if banner.startswith(b"220") else f"GridFTP port {port} said {banner!r}"

    return probe


def relays_answer(control_socket: Path, names: set[str]) -> Probe:
    def probe() -> str | None:
        try:
            answer = control(control_socket, {"op": "stats"}, timeout_s=_PROBE_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            return f"relay control socket {control_socket}: {exc}"
        relays = answer.get("relays")
        if answer.get("ok") is not True or not isinstance(relays, dict):
            return f"relay control socket answered {answer}"
        missing = names - set(relays)
        return f"relays missing: {', '.join(sorted(missing))}" if missing else None

    return probe
