"""A real Prometheus server (Debian's `prometheus` package) scraping a running fedprobe's
/metrics every second, for the /metrics and the Grafana dashboards' tests. Started by this
process on a free loopback port with a configuration and a database in a folder of its own
(never the system service), stopped by its pid."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.servers import free_port

START_TIMEOUT_S = 30.0
CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: fedprobe
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {token_file}
    static_configs:
      - targets: ["{target}"]
"""


class PrometheusServer:
    """`prometheus` scraping `target` (host:port) with the bearer `token`."""

    def __init__(self, *, target: str, token: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fedprobe-test-prometheus-", dir="/tmp"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        token_file = self.folder / "token"
        token_file.touch(mode=0o600)  # the token never reaches argv: Prometheus reads it here
        token_file.write_text(token)
        config = self.folder / "prometheus.yml"
        config.write_text(CONFIG.format(token_file=token_file, target=target))
        self.argv = [
            _binary(),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        with (self.folder / "log").open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self._wait(lambda: httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def query(self, expression: str) -> httpx.Response:
        """Prometheus's answer to an instant query (400 for one that does not parse)."""
        return httpx.get(f"{self.url}/api/v1/query", params={"query": expression}, timeout=10)

    def result(self, expression: str, timeout_s: float = 15.0) -> list[dict[str, Any]]:
        """The vector of an instant query, polled until it is not empty (the next scrape may
        not have happened yet); [] after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self.query(expression)
            assert answer.status_code == 200, f"{expression}: {answer.status_code} {answer.text}"
            found: list[dict[str, Any]] = answer.json()["data"]["result"]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def scrape_errors(self) -> list[str]:
        """Each target's last scrape error (what to say when a query finds nothing)."""
        answer = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        targets = answer["data"]["activeTargets"]
        return [f"{t['scrapeUrl']}: {t['health']} {t['lastError']}" for t in targets]

    def log(self) -> str:
        path = self.folder / "log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _wait(self, ready: Any) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start:\n{self.log()}")
            time.sleep(0.05)


def _binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise RuntimeError("prometheus is not installed: bin/setup --tests installs Debian's")
    return found
