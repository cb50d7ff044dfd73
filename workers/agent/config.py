"""What an enrolled agent keeps on its host: a folder of its own (0700) holding `agent.json`
(the server's address, its vantage point and queue, its agent token and broker URL: 0600)
and `agent.key`, its private key (0600), made there and never sent anywhere.

FEDPROBE_AGENT_DIR names the folder (default ~/.config/fedprobe-agent).
"""

from __future__ import annotations

import json
import os
import ssl
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from nacl.public import PrivateKey

from workers.agent.sealing import encode_key, private_key
from workers.engine.credentials import resolve_ca_dir
from workers.engine.egress import EgressPolicy

CONFIG_FILE = "agent.json"
KEY_FILE = "agent.key"


class AgentConfigError(Exception):
    """The agent's folder is missing, unreadable or open to others; the message says which."""


def agent_dir(explicit: str | None = None) -> Path:
    chosen = explicit or os.environ.get("FEDPROBE_AGENT_DIR")
    return Path(chosen) if chosen else Path.home() / ".config" / "fedprobe-agent"


@dataclass(frozen=True)
class AgentConfig:
    server: str  # https://fedprobe.example.org
    vantage_point: str
    queue: str
    agent_token: str
    broker_url: str
    # Servers are verified against this (a PEM bundle): the fedprobe server's HTTPS, and the
    # broker's amqps; empty: the system store.
    server_ca_file: str = ""

    def __repr__(self) -> str:
        return f"AgentConfig(server={self.server!r}, vantage_point={self.vantage_point!r})"

    def write(self, folder: Path, key: PrivateKey) -> None:
        """Write the folder: both files created 0600 (never readable by others, not even
        for a moment), the folder 0700."""
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
        _write_private(folder / KEY_FILE, encode_key(key) + "\n")
        _write_private(folder / CONFIG_FILE, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, folder: Path) -> tuple[AgentConfig, PrivateKey]:
        config_path, key_path = folder / CONFIG_FILE, folder / KEY_FILE
        for path in (config_path, key_path):
            try:
                mode = path.stat().st_mode & 0o777
            except FileNotFoundError:
                raise AgentConfigError(
                    f"{path} is missing: enrol first (python -m workers.agent enrol URL TOKEN)"
                ) from None
            if mode & 0o077:
                raise AgentConfigError(
                    f"{path} is readable by others (mode {mode:o}): chmod 600 it"
                )
        try:
            data = json.loads(config_path.read_text())
            config = cls(**data)
        except (ValueError, TypeError) as exc:
            raise AgentConfigError(
                f"{config_path} is not an agent's configuration: {exc}"
            ) from None
        return config, private_key(key_path.read_text().strip())


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_suffix(".new")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    temporary.replace(path)


@dataclass(frozen=True)
class HostSettings:
    """What this host decides for the runs it measures, whatever the server says: where they
    may connect, the CA folder endpoints are verified against, and the local files they may
    read (none unless listed). Read from the environment, as a worker's are."""

    egress: EgressPolicy
    ca_dir: str | None
    file_roots: tuple[str, ...]

    @classmethod
    def from_environment(cls) -> HostSettings:
        allowed = [c for c in os.environ.get("FEDPROBE_EGRESS_ALLOW", "").split(",") if c.strip()]
        try:
            egress = EgressPolicy.allowing(allowed)
        except ValueError as exc:
            raise AgentConfigError(f"FEDPROBE_EGRESS_ALLOW: {exc}") from None
        roots = tuple(r for r in os.environ.get("FEDPROBE_FILE_ROOTS", "").split(",") if r.strip())
        return cls(egress, resolve_ca_dir(None), roots)


def amqp_tls_options(url: str, ca_file: str) -> dict[str, object] | bool:
    """Celery's broker_use_ssl for a broker URL: amqps:// verifies the broker's certificate,
    against `ca_file` (else the system store), and its name; amqp:// is plain (one host, or a
    private network). The agent's and the central side's (webapp/settings.py) alike."""
    if not url.startswith("amqps://"):
        return False
    # py-amqp checks the certificate's name only when it is told which name to expect.
    options: dict[str, object] = {
        "cert_reqs": ssl.CERT_REQUIRED,
        "server_hostname": urlsplit(url).hostname,
    }
    if ca_file:
        options["ca_certs"] = ca_file
    return options
