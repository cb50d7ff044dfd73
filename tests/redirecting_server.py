"""An xrootd of a test's own beside the lab's, serving the lab's test files and the local
site's scratch folder, and redirecting elsewhere every open of the test files (`xrootd.redirect
HOST:PORT /fedprobe`: the outside audit's set-up for a credential that follows a redirection,
issue 17) or the namespace operations named (`xrootd.redirect HOST:PORT dirlist rm`: a
storage whose listings and deletes another host answers, as a cleanup meets it, issue 20).
What is not redirected is answered where the file is, so a run's preflight passes and its
clients (or its cleanup) meet the redirection."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.servers import free_port
from workers.engine.egress import EgressPolicy
from workers.lab import Lab, servers

# The scratch folder the lab's local site writes in (/scratch/local/), which the server
# exports too: writes and cleanups go there.
SITE = "local"

START_TIMEOUT_S = 20.0
# As the Celery workers run: loopback allowed by the egress policy (the lab is there), so
# only the credential's scope stands between the token and the second server.
LOOPBACK = EgressPolicy.allowing(["127.0.0.0/8", "::1/128"])


@dataclass(frozen=True)
class RedirectingServer:
    port: int
    log: Path

    def url(self, scheme: str, path: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}//{path.lstrip('/')}"


@contextlib.contextmanager
def redirecting_xrootd(
    lab: Lab,
    target: str,
    *,
    token: bool,
    redirected: tuple[str, ...] = (servers.TEST_FILE_EXPORT,),
) -> Iterator[RedirectingServer]:
    """An xrootd at 127.0.0.1 redirecting to `target` (host:port) what `redirected` names:
    the opens under absolute paths, or xrootd's operations (`dirlist`, `rm`, `stat`, ...;
    every request of that kind, whatever its path). With `token`, a TLS token server as the
    lab's (only the lab issuer's tokens log in), else a plain anonymous data server. Stopped
    by its pid at the end."""
    port = free_port()
    instance = f"redirecting-{'token' if token else 'plain'}-{port}"
    if token:
        text = servers.token_server_config(lab.paths, port, lab.server_tls())
        process = servers.token_xrootd(lab.paths, instance, lab.paths.run / f"{instance}.cfg")
    else:
        text = servers.data_server_config(lab.paths, port, free_port())
        process = servers.xrootd(lab.paths, instance, lab.paths.run / f"{instance}.cfg")
    config = lab.paths.run / f"{instance}.cfg"
    redirect = f"xrootd.redirect {target} {' '.join(redirected)}\n"
    config.write_text(text + servers.scratch_config(SITE) + redirect)
    running = subprocess.Popen(
        process.argv,
        env={**os.environ, **dict(process.env)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, running)
        yield RedirectingServer(port, lab.paths.server_log(instance, "xrootd"))
    finally:
        running.terminate()
        running.wait(timeout=10)
        config.unlink(missing_ok=True)


def port_of(lab: Lab, endpoint: str) -> int:
    """The port of a lab endpoint's server: the second server a test redirects to."""
    port = urlsplit(lab.endpoint(endpoint).url).port
    assert port is not None
    return port


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until an xrootd of a test's own answers on 127.0.0.1:`port`."""
    give_up = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < give_up:
        assert process.poll() is None, "xrootd ended while starting"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"xrootd not listening on {port}")


class LogWatch:
    """What a server's log gained since the watch began: the logins, as xrootd writes them
    (`... login as lab user`, `... login as labuser`)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.start = log.stat().st_size if log.exists() else 0

    def new_lines(self) -> list[str]:
        with self.log.open("rb") as text:
            text.seek(self.start)
            return text.read().decode(errors="replace").splitlines()

    def logins(self) -> list[str]:
        return [line for line in self.new_lines() if " login as " in line]
