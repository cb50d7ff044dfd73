"""Where a lab keeps things inside its state dir."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LabPaths:
    """The layout of a lab dir. Servers run as `nobody` when root starts the lab, so admin,
    logs, xcache, xrd-pids and home belong to that user; data is root's, world-readable."""

    root: Path

    @property
    def data(self) -> Path:
        """The test files every site (local, near, far) and the GridFTP server export."""
        return self.root / "data"

    @property
    def scratch(self) -> Path:
        """The sites' scratch folders (`scratch/SITE`, nobody's): emptied at each `up`."""
        return self.data / "scratch"

    @property
    def read_token(self) -> Path:
        """A ready-made token that reads the test files and the scratch folders, writes nothing."""
        return self.pki / "read-token"

    @property
    def write_token(self) -> Path:
        """A ready-made token that also creates, overwrites and deletes under /scratch."""
        return self.pki / "write-token"

    def fed(self, server: str) -> Path:
        """oss.localroot of a data server behind the redirector (fed-a, fed-b)."""
        return self.root / server

    @property
    def xcache(self) -> Path:
        return self.root / "xcache"

    @property
    def admin(self) -> Path:
        return self.root / "admin"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def home(self) -> Path:
        """The servers' working dir (xrootd makes a folder per instance in it)."""
        return self.root / "home"

    @property
    def run(self) -> Path:
        """Configs, pid files, the relay's control socket and the state file."""
        return self.root / "run"

    @property
    def pids(self) -> Path:
        return self.run / "pids"

    @property
    def xrd_pids(self) -> Path:
        """all.pidpath: xrootd and cmsd write their own pid files here."""
        return self.root / "xrd-pids"

    @property
    def state(self) -> Path:
        return self.run / "state.json"

    @property
    def manifest(self) -> Path:
        return self.root / "files.json"

    @property
    def relay_control(self) -> Path:
        return self.run / "relay.sock"

    @property
    def relay_config(self) -> Path:
        return self.run / "relays.json"

    @property
    def pki(self) -> Path:
        """Secrets, mode 0700: CA and user keys, the issuer's signing key, client secrets,
        proxies and tokens. Kept across `up`s, like `certs`."""
        return self.root / "pki"

    @property
    def certs(self) -> Path:
        """What the servers read: the CA dirs, host certificates, host keys (nobody's, 0400)."""
        return self.root / "certs"

    @property
    def signing_key(self) -> Path:
        """The token issuer's EC key."""
        return self.pki / "issuer-key.pem"

    @property
    def oauth_clients(self) -> Path:
        return self.pki / "clients.json"

    @property
    def probe_token(self) -> Path:
        """The token readiness checks use."""
        return self.pki / "readiness-token"

    @property
    def probe_proxy(self) -> Path:
        """The X.509 proxy readiness checks use."""
        return self.pki / "readiness-proxy"

    def proxy(self, *, expired: bool = False, rogue: bool = False) -> Path:
        """Where `lab proxy` writes (never /tmp/x509up_u<uid>, which clients find unasked)."""
        return self.pki / ("x509up" + "-rogue" * rogue + "-expired" * expired)

    @property
    def token_cache(self) -> Path:
        """$XDG_CACHE_HOME of the token sites' xrootds: the SciTokens key cache."""
        return self.home / "xdg-cache"

    @property
    def issuer_config(self) -> Path:
        return self.run / "issuer.json"

    @property
    def issuer_ready(self) -> Path:
        """The issuer writes its pid here once it listens."""
        return self.run / "issuer.pid"

    @property
    def scitokens_config(self) -> Path:
        return self.run / "scitokens.cfg"

    @property
    def token_authdb(self) -> Path:
        """acc.authdb of the token sites: requests without a token get nothing."""
        return self.run / "token.authdb"

    @property
    def gsi_authdb(self) -> Path:
        return self.run / "gsi.authdb"

    @property
    def gridmap(self) -> Path:
        return self.run / "grid-mapfile"

    def config(self, name: str) -> Path:
        return self.run / f"{name}.cfg"

    def output(self, process: str) -> Path:
        """stdout and stderr of one lab process."""
        return self.logs / f"{process}.out"

    def server_log(self, instance: str, program: str) -> Path:
        """The log xrootd/cmsd write with `-l LOGS/PROGRAM.log -n INSTANCE`."""
        return self.logs / instance / f"{program}.log"

    def owned_by_server_user(self) -> list[Path]:
        return [self.admin, self.logs, self.xcache, self.xrd_pids, self.home]
