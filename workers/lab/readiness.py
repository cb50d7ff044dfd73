"""Real readiness probes: a probe returns None once its server answers, else why not yet."""

from __future__ import annotations

import base64
import http.client
import os
import re
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

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
_CLIENT_SETTINGS = ("XRD_", "X509_", "BEARER_TOKEN", "XrdSec")
# Every xrdfs (and xrootd) start asks the resolver something; a burst of them loses a UDP
# answer now and then (seen under gVisor), and glibc waits 5 s before asking again.
_RESOLVER = {"RES_OPTIONS": "timeout:1 attempts:3"}
_XRDFS_AT_ONCE = threading.BoundedSemaphore(6)


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


def client_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without what steers XrdCl or picks credentials, plus
    `extra`: a token or proxy of the caller's must not stand in for the lab's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_SETTINGS)}
    return _RESOLVER | env | dict(extra or {})


def initialized(log: Path, program: str) -> Probe:
    """xrootd (or cmsd) says in its log that it has finished its start-up. It listens before
    that, and a client that comes too early can wait out XrdCl's whole connection window."""
    done = re.compile(rf"^------ {program} \S+ initialization completed\.$", re.M)

    def probe() -> str | None:
        try:
            text = log.read_text(errors="replace")
        except OSError as exc:
            return f"{log}: {exc.strerror}"
        return None if done.search(text) else f"{log} does not say initialization completed"

    return probe


def xrootd_stat(
    port: int,
    path: str,
    size: int,
    *,
    scheme: str = "root",
    host: str = LOOPBACK,
    env: Mapping[str, str] | None = None,
) -> Probe:
    """`xrdfs stat` in a child process: nothing of XrdCl stays behind in this one. `env` adds
    credentials (BEARER_TOKEN_FILE, X509_USER_PROXY, X509_CERT_DIR, XrdSecPROTOCOL)."""
    url = f"{scheme}://{host}:{port}"

    def probe() -> str | None:
        try:
            with _XRDFS_AT_ONCE:
                done = subprocess.run(
                    ["xrdfs", url, "stat", path],
                    capture_output=True,
                    text=True,
                    env=client_env({**_XRDFS_ENV, **(env or {})}),
                    timeout=20,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            return f"xrdfs stat {url}/{path}: no answer in 20 s"
        if done.returncode != 0 or f"Size:   {size}\n" not in done.stdout:
            answer = (done.stderr or done.stdout).strip()
            return f"xrdfs stat {url}/{path}: {answer}"
        return None

    return probe


def http_head(
    port: int,
    path: str,
    size: int,
    *,
    tls: ssl.SSLContext | None = None,
    host: str = LOOPBACK,
    headers: Mapping[str, str] | None = None,
) -> Probe:
    """HEAD of a file: over https with `tls` (which may carry a client certificate)."""
    url = f"{'https' if tls else 'http'}://{host}:{port}{path}"

    def probe() -> str | None:
        conn = (
            http.client.HTTPSConnection(host, port, timeout=_PROBE_TIMEOUT_S, context=tls)
            if tls
            else http.client.HTTPConnection(host, port, timeout=_PROBE_TIMEOUT_S)
        )
        try:
            conn.request("HEAD", path, headers=dict(headers or {}))
            response = conn.getresponse()
            length = response.getheader("Content-Length")
        except (OSError, http.client.HTTPException) as exc:
            return f"HEAD {url}: {exc}"
        finally:
            conn.close()
        if response.status != 200 or length != str(size):
            return f"HEAD {url}: {response.status}, length {length}"
        return None

    return probe


def tls_context(ca_file: Path, client_cert: Path | None = None) -> ssl.SSLContext:
    """Trusts the lab CA only; `client_cert` (a proxy file: cert, key, chain) for X.509."""
    context = ssl.create_default_context(cafile=str(ca_file))
    if client_cert is not None:
        context.load_cert_chain(client_cert)
    return context


def issuer_grants(token_url: str, tls: ssl.SSLContext, client_id: str, secret: str) -> Probe:
    """A client-credentials grant answers a token: the issuer's keys, clients and TLS work."""
    target = urlsplit(token_url)
    body = urlencode({"grant_type": "client_credentials"})
    basic = base64.b64encode(f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode())
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": f"Basic {basic.decode()}",
    }

    def probe() -> str | None:
        conn = http.client.HTTPSConnection(
            target.hostname or LOOPBACK, target.port, timeout=_PROBE_TIMEOUT_S, context=tls
        )
        try:
            conn.request("POST", target.path, body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException) as exc:
            return f"POST {token_url}: {exc}"
        finally:
            conn.close()
        if response.status != 200 or b'"access_token"' not in answer:
            return f"POST {token_url}: {response.status} {answer[:200]!r}"
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
