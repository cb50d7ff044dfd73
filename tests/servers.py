"""Private Redis and PostgreSQL servers for fault tests: started, killed and restarted at will.

The shared servers (PostgreSQL on 5432, Redis on 6379) are never restarted by a test; a test
that needs an outage starts a server of its own on a free port, in a fresh folder, and stops
it by pid when it ends.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import redis

START_TIMEOUT_S = 30.0


@contextlib.contextmanager
def celery_sends_to(url: str) -> Iterator[None]:
    """This process's Celery app sends to the broker at `url` meanwhile (the web side of a
    test: launches, resends). `memory://` keeps every message inside this process."""
    from webapp.celery import app

    saved = app.conf.broker_url
    _use_broker(app, url)
    try:
        yield
    finally:
        _use_broker(app, saved)


def _use_broker(app: Any, url: str) -> None:
    # The app takes its connection pools from kombu's registry (one per broker) on first use:
    # forget them so that the next send takes those of `url`. They stay open in the registry
    # (closing one would break the app's next use of that broker).
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """`redis-server` on a free loopback port, without persistence: a restart loses every key,
    as a Redis without AOF or RDB does."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        argv = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--daemonize", "no",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self._wait_ready()
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: clients see their connections reset."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            while True:
                with contextlib.suppress(redis.ConnectionError):
                    if client.ping():
                        return
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start:\n{self.log_path.read_text()}")
                time.sleep(0.05)
        finally:
            client.close()


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
    )
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return found[-1].parent


class PostgresCluster:
    """A PostgreSQL cluster of its own (initdb in a fresh folder, trust auth, a free port).

    PostgreSQL refuses to run as root: then the cluster runs as the `postgres` system user,
    in a folder of /tmp that user owns (pytest's tmp_path is private to root).
    """

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: a certificate and its key the server offers TLS with (ssl=on)."""
        self.port = free_port()
        self.bin = postgres_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="fedprobe-test-pg-", dir="/tmp"))
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self._user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if self._user is not None:
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        self._tls = ""
        if tls is not None:
            for source, name in zip(tls, ("server.crt", "server.key"), strict=True):
                target = self.dir / name
                shutil.copyfile(source, target)
                target.chmod(0o600)  # PostgreSQL refuses a key others may read
                if self._user is not None:
                    os.chown(target, self._user.pw_uid, self._user.pw_gid)
            self._tls = (
                f" -c ssl=on -c ssl_cert_file={self.dir / 'server.crt'}"
                f" -c ssl_key_file={self.dir / 'server.key'}"
            )

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresCluster:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        self._pg_ctl("start")
        return self

    def restart(self) -> None:
        """A fast restart: every open connection is terminated, as in a failover."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        shutil.rmtree(self.dir, ignore_errors=True)

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off" + self._tls
        )
        self._run(
            "pg_ctl", action, "-D", str(self.data), "-l", str(self.log_path), "-o", options,
            "-w", "-t", str(int(START_TIMEOUT_S)), *extra,
        )  # fmt: skip

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin / tool), *args], capture_output=True, text=True, check=False,
            user=self._user.pw_uid if self._user else None,
            group=self._user.pw_gid if self._user else None,
            cwd=self.dir, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if done.returncode != 0:
            log = self.log_path.read_text() if self.log_path.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{done.stdout}{done.stderr}{log}")
