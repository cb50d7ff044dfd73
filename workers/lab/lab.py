"""The lab federation: real xrootd, XrdHttp, cmsd, XCache and GridFTP servers on loopback,
behind relays that give the sites their round-trip times (see ports.py for the ports).

    Lab(Path("/tmp/fedprobe-lab"), profile="test").up()

A running lab is described by run/state.json in its dir; any Lab object for that dir (in
any process) reads its endpoints from there, whatever profile or ports it was built with.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from workers.lab import processes, servers
from workers.lab.credentials import LabCredentials
from workers.lab.endpoints import (
    FED_SERVERS,
    SCRATCH_SITES,
    LabEndpoint,
    build_endpoints,
    issuer_url,
)
from workers.lab.errors import LabError
from workers.lab.files import (
    DEFAULT_FILE_SIZES,
    LabFile,
    MiB,
    TextSink,
    ensure_files,
    lab_file_path,
)
from workers.lab.issuer import DEFAULT_SCOPE, LAB_AUDIENCE
from workers.lab.launch import Launcher
from workers.lab.paths import LabPaths
from workers.lab.ports import PortLayout, check_ports_free
from workers.lab.profiles import PROFILES
from workers.lab.relay import MODES, control
from workers.lab.servers import Tls

STATE_VERSION = 2
FED_FILE_SIZE = 4 * MiB
# A UNIX socket path longer than this does not fit in sockaddr_un.
_MAX_SOCKET_PATH = 107
_SHARED_DATA_SITES = ("local", "near", "far", "xcache")
TokenKind = Literal["read", "write"]


class Lab:
    """The lab federation kept in `state_dir`. See the module docstring."""

    def __init__(
        self,
        state_dir: Path,
        *,
        profile: str = "test",
        base_port: int = 21000,
        file_sizes: Sequence[int] | None = None,
    ) -> None:
        if profile not in PROFILES:
            known = ", ".join(sorted(PROFILES))
            raise LabError(f"unknown profile {profile!r}: choose one of {known}")
        sizes = DEFAULT_FILE_SIZES if file_sizes is None else tuple(file_sizes)
        if not sizes or any(size < 1 for size in sizes):
            raise LabError(f"file sizes must be at least 1 byte, got {list(sizes)}")
        self.state_dir = Path(os.path.abspath(state_dir))
        self.profile = PROFILES[profile]
        self.layout = PortLayout(base_port)
        self.file_sizes = tuple(sorted(set(sizes)))
        self.paths = LabPaths(self.state_dir)
        self.progress: TextSink | None = sys.stderr

    # -- life cycle -------------------------------------------------------------------------

    def up(self) -> None:
        """Start every server, wait until each answers, record the state."""
        if self.running_processes():
            raise LabError(f"lab already running in {self.state_dir}")
        check_ports_free(self.layout)
        self._prepare_dirs()
        credentials = LabCredentials(self.paths, issuer_url(self.layout))
        credentials.ensure(servers.server_user_ids() if servers.runs_as_root() else None)
        shared, own = self._ensure_files()
        launcher = Launcher(
            self.paths,
            self.layout,
            self.profile,
            shared[0],
            {s: own[s][0] for s in FED_SERVERS},
            credentials=credentials,
        )
        try:
            launcher.launch()
        except BaseException:
            processes.stop(launcher.started.values(), self._marker)
            self._forget_processes()
            raise
        endpoints = build_endpoints(
            self.layout, self.profile, self.paths, shared, own, ca_dir=self.ca_dir()
        )
        self._write_state(launcher, endpoints, credentials)

    def down(self) -> None:
        """Stop what `up` started (SIGTERM, wait, SIGKILL); nothing to do is fine."""
        processes.stop(processes.read_pid_files(self.paths.pids).values(), self._marker)
        self._forget_processes()

    def is_running(self) -> bool:
        """True when the state file exists and every process it names is alive."""
        recorded = self._recorded_pids()
        return bool(recorded) and self.paths.state.exists() and not self.dead_processes()

    def running_processes(self) -> dict[str, int]:
        """Processes of this lab that are alive, by name."""
        return {
            name: pid
            for name, pid in self._recorded_pids().items()
            if processes.is_alive(pid, self._marker)
        }

    def dead_processes(self) -> dict[str, int]:
        """Processes the lab started that are gone (a lab that needs `down`)."""
        return {
            name: pid
            for name, pid in self._recorded_pids().items()
            if not processes.is_alive(pid, self._marker)
        }

    # -- what a running lab offers ----------------------------------------------------------

    def state(self) -> dict[str, object]:
        """The running lab's state file (profile, ports, processes, endpoints)."""
        try:
            data = json.loads(self.paths.state.read_text())
        except FileNotFoundError:
            raise LabError(f"no lab running in {self.state_dir}") from None
        except json.JSONDecodeError as exc:
            raise LabError(f"{self.paths.state} is damaged: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise LabError(f"{self.paths.state} was written by another version of the lab")
        return data

    def endpoints(self) -> list[LabEndpoint]:
        listed = self.state()["endpoints"]
        assert isinstance(listed, list)
        return [LabEndpoint.from_json(item) for item in listed]

    def endpoint(self, name: str) -> LabEndpoint:
        endpoints = self.endpoints()
        for endpoint in endpoints:
            if endpoint.name == name:
                return endpoint
        known = ", ".join(e.name for e in endpoints)
        raise LabError(f"no endpoint {name!r} in the lab; it has {known}")

    def data_dir(self, site: str) -> Path:
        """Where a site's files live: a file dropped there is served by that site."""
        if site in _SHARED_DATA_SITES:
            return self.paths.data
        if site in FED_SERVERS:
            return self.paths.fed(site)
        raise LabError(
            f"site {site!r} has no data dir: use one of {', '.join(_SHARED_DATA_SITES)}, "
            f"{', '.join(FED_SERVERS)}"
        )

    # -- credentials for the authenticated endpoints ---------------------------------------

    def ca_dir(self) -> Path:
        """The lab CA's dir (X509_CERT_DIR): `<hash>.0`, `<hash>.signing_policy`, the CA."""
        return self._credentials_dir().pki.lab.ca_dir

    def ca_file(self) -> Path:
        """The lab CA's certificate, for clients that take a file (httpx `verify`)."""
        return self._credentials_dir().pki.lab.ca_cert

    def server_tls(self) -> Tls:
        """The host certificate (localhost, 127.0.0.1), its key and the CA folder the lab's
        TLS servers use: for a server of a test's own beside the lab's."""
        return self._credentials_dir().server_tls()

    def rogue_ca_dir(self) -> Path:
        """A CA the lab's servers do not trust (and that does not trust them)."""
        return self._credentials_dir().pki.rogue.ca_dir

    def issuer_url(self) -> str:
        """The running lab's token issuer: the `iss` of its tokens, and where it answers."""
        return str(self.state()["issuer"])

    def mint_token(
        self,
        scope: str = DEFAULT_SCOPE,
        audience: str = LAB_AUDIENCE,
        lifetime_s: float = 3600,
        expired: bool = False,
    ) -> str:
        """A token of the lab's issuer (WLCG profile, ES256). An expired one ended an hour ago."""
        return self._credentials().mint_token(scope, audience, lifetime_s, expired)

    def token_file(self, kind: TokenKind = "read") -> Path:
        """A ready-made token file (0600, valid 7 days from `up`) for BEARER_TOKEN_FILE:
        "read" reads /fedprobe and /scratch (issuer.READ_SCOPE), "write" also creates,
        overwrites and deletes under /scratch (issuer.WRITE_SCOPE)."""
        tokens = self.state().get("token_files")
        if not isinstance(tokens, dict) or kind not in tokens:
            raise LabError(f"no {kind!r} token in this lab: one of read, write")
        return Path(str(tokens[kind]))

    def write_proxy(
        self, path: Path | None = None, expired: bool = False, rogue: bool = False
    ) -> Path:
        """An X.509 proxy of the lab user (0600): from the rogue CA if `rogue`. By default in
        the lab's pki/ dir, never where clients look unasked (/tmp/x509up_u<uid>)."""
        return self._credentials_dir().write_proxy(path, expired=expired, rogue=rogue)

    def oauth_client(self, short: bool = False, scratch_path: str | None = None) -> dict[str, str]:
        """One of the issuer's clients: token_url, client_id, client_secret, scope, audience.
        Its tokens live 20 minutes, or 30 seconds if `short`. They read the test files
        (`storage.read:/fedprobe`); with `scratch_path` (an endpoint's) they also read,
        create, overwrite and delete under that folder (issuer.scratch_write_scope)."""
        return self._credentials().oauth_client(short, scratch_path)

    def _credentials(self) -> LabCredentials:
        return LabCredentials(self.paths, self.issuer_url())

    def _credentials_dir(self) -> LabCredentials:
        """The credentials on disk, for what needs no running issuer."""
        return LabCredentials(self.paths, issuer_url(self.layout))

    # -- relays -----------------------------------------------------------------------------

    def set_relay_mode(
        self, relay: str, mode: str, cut_after: int | None = None, spare: int = 0
    ) -> None:
        """`relay` is a relay's name or an endpoint's: endpoints that share a port (near-roots
        and near-https are near-token's) share its relay. `cut_after` and `spare` as in
        `Relay.set_mode`."""
        if mode not in MODES:
            raise LabError(f"unknown relay mode {mode!r}: choose one of {', '.join(MODES)}")
        relay = self.relay_of(relay)
        request: dict[str, object] = {
            "op": "mode",
            "relay": relay,
            "mode": mode,
            "cut_after": cut_after,
        }
        if spare:  # only then: a relay process of a lab started before `spare` refuses it
            request["spare"] = spare
        self._relay_request(request)

    def relay_of(self, endpoint: str) -> str:
        """The relay in front of an endpoint (or the name itself, when it names no endpoint)."""
        relays = self.state().get("endpoint_relays", {})
        assert isinstance(relays, dict)
        return str(relays.get(endpoint, endpoint))

    def relay_stats(self) -> dict[str, dict[str, object]]:
        relays = self._relay_request({"op": "stats"})["relays"]
        assert isinstance(relays, dict)
        return relays

    # -- internals --------------------------------------------------------------------------

    @property
    def _marker(self) -> str:
        """Every lab process names a file of the run dir on its command line."""
        return f"{self.paths.run}/"

    def _recorded_pids(self) -> dict[str, int]:
        return processes.read_pid_files(self.paths.pids)

    def _relay_request(self, request: dict[str, object]) -> dict[str, object]:
        relays = self.state().get("relays")
        assert isinstance(relays, list)
        name = request.get("relay")
        if name is not None and name not in relays:
            known = ", ".join(relays) or "none (no site has an added RTT)"
            raise LabError(f"no relay {name!r} in this lab; relays: {known}")
        try:
            answer = control(self.paths.relay_control, request)
        except (OSError, ValueError) as exc:
            raise LabError(f"relay process does not answer: {exc}") from exc
        if answer.get("ok") is not True:
            raise LabError(f"relay refused {request}: {answer.get('error')}")
        return answer

    def _prepare_dirs(self) -> None:
        if len(str(self.paths.relay_control)) > _MAX_SOCKET_PATH:
            raise LabError(f"lab dir {self.state_dir} is too long for a UNIX socket path")
        self._check_server_user_can_enter()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o755)
        for fresh in (*self.paths.owned_by_server_user(), self.paths.run):
            shutil.rmtree(fresh, ignore_errors=True)
        for folder in (self.paths.data, self.paths.run, self.paths.pids, *self._fed_roots()):
            folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        for folder in self.paths.owned_by_server_user():
            folder.mkdir(mode=0o755)
            if servers.runs_as_root():
                os.chown(folder, *servers.server_user_ids())
        self._prepare_scratch()

    def _prepare_scratch(self) -> None:
        """Empty scratch folders, one per site, writable by the servers (files are written
        as nobody); the data dir around them stays root's and read-only to them."""
        shutil.rmtree(self.paths.scratch, ignore_errors=True)
        self.paths.scratch.mkdir(mode=0o755)
        for site in SCRATCH_SITES:
            folder = self.paths.data / servers.scratch_path(site).strip("/")
            folder.mkdir(mode=0o755)
            if servers.runs_as_root():
                os.chown(folder, *servers.server_user_ids())

    def _fed_roots(self) -> list[Path]:
        return [self.paths.fed(server) for server in FED_SERVERS]

    def _check_server_user_can_enter(self) -> None:
        """xrootd runs as nobody: it must be able to walk down to the lab dir."""
        if not servers.runs_as_root():
            return
        for folder in self.state_dir.parents:
            if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
                raise LabError(
                    f"{folder} is not searchable by user {servers.SERVER_USER}, which the "
                    f"servers run as: put the lab dir where every parent is (e.g. under /tmp)"
                )

    def _ensure_files(self) -> tuple[list[LabFile], dict[str, list[LabFile]]]:
        """The shared test files, and each fed server's own file plus links to the shared ones."""
        wanted = [(lab_file_path(size), size) for size in self.file_sizes]
        shared = ensure_files(self.paths.data, wanted, self.paths.manifest, self.progress)
        own = {}
        for server in FED_SERVERS:
            root = self.paths.fed(server)
            path = f"/fed/{server.removeprefix('fed-')}-4M"
            own[server] = ensure_files(
                root, [(path, FED_FILE_SIZE)], root / "files.json", self.progress
            )
            for lab_file in shared:
                _link(self.paths.data / lab_file.path.lstrip("/"), root / lab_file.path.lstrip("/"))
        return shared, own

    def _write_state(
        self, launcher: Launcher, endpoints: list[LabEndpoint], credentials: LabCredentials
    ) -> None:
        state = {
            "version": STATE_VERSION,
            "state_dir": str(self.state_dir),
            "profile": self.profile.name,
            "base_port": self.layout.base,
            "ports": [self.layout.base, self.layout.last],
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "processes": launcher.started,
            "relays": sorted(launcher.relay_names),
            "endpoint_relays": _endpoint_relays(launcher, endpoints),
            "ca_dir": str(self.ca_dir()),
            "rogue_ca_dir": str(self.rogue_ca_dir()),
            "issuer": credentials.issuer,
            "token_files": {
                "read": str(self.paths.read_token),
                "write": str(self.paths.write_token),
            },
            "endpoints": [endpoint.to_json() for endpoint in endpoints],
        }
        partial = self.paths.state.with_name("state.json.partial")
        partial.write_text(json.dumps(state, indent=2) + "\n")
        partial.replace(self.paths.state)

    def _forget_processes(self) -> None:
        self.paths.state.unlink(missing_ok=True)
        for pid_file in self.paths.pids.glob("*.pid"):
            pid_file.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.paths.relay_control.unlink(missing_ok=True)


def _endpoint_relays(launcher: Launcher, endpoints: list[LabEndpoint]) -> dict[str, str]:
    by_port = {spec.listen_port: spec.name for spec in launcher.relays}
    return {
        endpoint.name: by_port[port]
        for endpoint in endpoints
        if (port := urlsplit(endpoint.url).port) in by_port
    }


def _link(source: Path, target: Path) -> None:
    """Hard-link a shared test file into a fed server's tree (a copy across filesystems)."""
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if target.samefile(source):
            return
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
