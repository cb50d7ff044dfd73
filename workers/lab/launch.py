"""Starting a lab's processes in dependency order and waiting until each one really answers.

Order matters for the redirector: each xrootd of a cluster finds its cmsd at start-up and
retries only every 10 s, so the manager's cmsd must listen and each data server's cmsd must
have made its admin socket before the xrootds start. Everything else starts at once.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from workers.lab import readiness, servers
from workers.lab.credentials import LabCredentials
from workers.lab.endpoints import GSI_HOST
from workers.lab.errors import LabError, PortTaken
from workers.lab.files import LabFile
from workers.lab.issuer import (
    LAB_AUDIENCE,
    READ_SCOPE,
    READY_MADE_TOKEN_LIFETIME_S,
    WRITE_SCOPE,
    IssuerConfig,
    seed_scitokens_cache,
)
from workers.lab.paths import LabPaths
from workers.lab.pki import dn_of
from workers.lab.ports import PortLayout
from workers.lab.processes import exit_status, is_alive, spawn
from workers.lab.profiles import Profile
from workers.lab.readiness import Probe
from workers.lab.relay import RelaySpec
from workers.lab.servers import ServerProcess

READY_TIMEOUT_S = 60.0
# The public ports of a site: anonymous xroot, anonymous HTTP, the token site, the GSI site.
SITE_SERVICES = ("root", "http", "token", "gsi")
SITES = ("local", "near", "far")
_PROBE_TOKEN_LIFETIME_S = 2 * READY_TIMEOUT_S
_CHECKS_AT_ONCE = 32
_POLL_S = 0.02
_LOG_TAIL_LINES = 20
_COMPLAINT = re.compile(r"error|fail|unable|invalid|denied|refus|cannot|not be|warning", re.I)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What xrootd, cmsd and the relays log when a port was taken between the check and their bind.
_ADDRESS_IN_USE = "address already in use"


Check = Future[str | None]
"""A readiness check under way: its failure message, or None once ready."""


@dataclass(frozen=True)
class Readiness:
    """Probes run in order until each passes; `servers` are the processes they depend on."""

    servers: tuple[str, ...]
    probes: tuple[Probe, ...]


def relay_specs(layout: PortLayout, profile: Profile) -> list[RelaySpec]:
    """A relay in front of each public port of each site with an RTT or a cap; none for an
    uncapped 0 ms site. A site's relays share its link (and its cap): one WAN link per site."""
    return [
        RelaySpec(
            name=f"{site}-{service}",
            listen_port=layout.port(f"{site}-{service}"),
            target_host=readiness.LOOPBACK,
            target_port=layout.port(f"{site}-{service}-backend"),
            rtt_ms=rtt,
            bandwidth_mbps=profile.bandwidth(site),
            link=site,
        )
        for site, rtt in profile.rtt_ms.items()
        if profile.relayed(site)
        for service in SITE_SERVICES
    ]


class Launcher:
    """Starts the processes of one lab and remembers their pids, also when a start fails."""

    def __init__(
        self,
        paths: LabPaths,
        layout: PortLayout,
        profile: Profile,
        probe_file: LabFile,
        fed_files: Mapping[str, LabFile],
        *,
        credentials: LabCredentials,
    ) -> None:
        self.paths, self.layout, self.profile = paths, layout, profile
        self.probe_file, self.fed_files = probe_file, fed_files
        self.credentials = credentials
        self.started: dict[str, int] = {}
        self.processes: dict[str, ServerProcess] = {}
        self.marker = f"{paths.run}/"
        self.deadline = time.monotonic() + READY_TIMEOUT_S
        self.relays = relay_specs(layout, profile)
        self.given_up = threading.Event()
        self.restart_lock = threading.Lock()
        self.restarted: set[str] = set()

    def launch(self) -> None:
        self.write_configs()
        # The federation first, so its cmsds log in before the other servers load the machine:
        # a data server whose login the manager drops tries again only ~9 s later (that still
        # happens now and then: docs/lab.md).
        manager = self.start(servers.cmsd(self.paths, "redirector", self.config("redirector")))
        self.wait([Readiness((manager,), (readiness.tcp_listens(self.port("redirector-cmsd")),))])
        fed_cmsds = [self.start(servers.cmsd(self.paths, s, self.config(s))) for s in self.fed]
        self.wait(
            [
                Readiness((name,), (readiness.path_exists(self.cmsd_socket(server)),))
                for name, server in zip(fed_cmsds, self.fed, strict=True)
            ]
        )
        for instance in ("redirector", *self.fed):
            self.start(servers.xrootd(self.paths, instance, self.config(instance)))
        for site in SITES:
            self.start(servers.xrootd(self.paths, site, self.config(site)))
            token = f"{site}-token"
            self.start(servers.token_xrootd(self.paths, token, self.config(token)))
            self.start(servers.xrootd(self.paths, f"{site}-gsi", self.config(f"{site}-gsi")))
        self.start(servers.issuer(self.paths))
        self.start(servers.gridftp(self.paths, self.port("local-ftp"), self.layout.ftp_data))
        self.start(servers.relays(self.paths))
        with ThreadPoolExecutor(max_workers=_CHECKS_AT_ONCE) as pool:
            try:
                # The authenticated sites take the most round trips (TLS, then ztn or gsi):
                # their checks run on while XCache starts.
                authenticated = self.begin(pool, self.authenticated_readiness())
                self.finish(self.begin(pool, self.readiness()))
                # XCache's client, once refused by the far site, waits out XrdCl's connection
                # window: it starts when the far site answers through its relay.
                self.start(servers.xrootd(self.paths, "xcache", self.config("xcache")))
                self.finish([*self.begin(pool, [self.xcache_readiness()]), *authenticated])
            finally:
                self.given_up.set()  # checks still running after a failure stop polling

    @property
    def fed(self) -> list[str]:
        return sorted(self.fed_files)

    def port(self, name: str) -> int:
        return self.layout.port(name)

    def config(self, instance: str) -> Path:
        return self.paths.config(instance)

    def cmsd_socket(self, instance: str) -> Path:
        return self.paths.admin / instance / ".olb" / "olbd.admin"

    def write_configs(self) -> None:
        for instance, text in self.config_texts().items():
            self.config(instance).write_text(text)
            self.config(instance).chmod(0o644)
        (self.paths.run / "gridftp.conf").write_text("# options are on the command line\n")
        relays = {"relays": [spec.to_json() for spec in self.relays]}
        self.paths.relay_config.write_text(json.dumps(relays, indent=2) + "\n")
        self.write_trust()

    def write_trust(self) -> None:
        """What the token and GSI sites trust, the issuer's config, and the readiness checks'
        own token and proxy."""
        paths, credentials = self.paths, self.credentials
        user_dn = dn_of(credentials.authority.user_cert)
        for path, text in (
            (paths.scitokens_config, servers.scitokens_config(credentials.issuer, LAB_AUDIENCE)),
            (paths.token_authdb, servers.token_authdb()),
            (paths.gsi_authdb, servers.gsi_authdb()),
            (paths.gridmap, servers.gridmap(user_dn)),
        ):
            path.write_text(text)
            path.chmod(0o644)
        owner = servers.server_user_ids() if servers.runs_as_root() else None
        jwks = credentials.signing_key().jwks()
        seed_scitokens_cache(paths.token_cache, credentials.issuer, jwks, owner)
        tls = credentials.server_tls()
        IssuerConfig(
            issuer=credentials.issuer,
            port=self.port("issuer"),
            host_cert=str(tls.cert),
            host_key=str(tls.key),
            signing_key=str(paths.signing_key),
            clients=str(paths.oauth_clients),
            ready_file=str(paths.issuer_ready),
        ).write(paths.issuer_config)
        token = credentials.mint_token(lifetime_s=_PROBE_TOKEN_LIFETIME_S)
        credentials.write_token(paths.probe_token, token)
        credentials.write_proxy(paths.probe_proxy)
        for path, scope in ((paths.read_token, READ_SCOPE), (paths.write_token, WRITE_SCOPE)):
            lifetime = READY_MADE_TOKEN_LIFETIME_S
            credentials.write_token(path, credentials.mint_token(scope, lifetime_s=lifetime))

    def config_texts(self) -> dict[str, str]:
        paths, port = self.paths, self.port
        texts = {site: servers.data_server_config(paths, *self.site_ports(site)) for site in SITES}
        tls = self.credentials.server_tls()
        for site in SITES:
            texts[f"{site}-token"] = servers.token_server_config(
                paths, self.backend(site, "token"), tls
            )
            texts[f"{site}-gsi"] = servers.gsi_server_config(paths, self.backend(site, "gsi"), tls)
        texts["redirector"] = servers.manager_config(
            paths, port("redirector-root"), port("redirector-cmsd")
        )
        for server in self.fed:
            texts[server] = servers.fed_server_config(
                paths, server, port(f"{server}-root"), port("redirector-cmsd")
            )
        texts["xcache"] = servers.xcache_config(paths, port("xcache-root"), port("far-root"))
        for site in SITES:
            for instance in (site, f"{site}-token", f"{site}-gsi"):
                texts[instance] += servers.scratch_config(site)
        return texts

    def site_ports(self, site: str) -> tuple[int, int]:
        """Where a site's anonymous xrootd listens (xroot, HTTP)."""
        return self.backend(site, "root"), self.backend(site, "http")

    def backend(self, site: str, service: str) -> int:
        """Where a site's server listens: behind its relay, or on the public port."""
        suffix = "-backend" if self.profile.relayed(site) else ""
        return self.port(f"{site}-{service}{suffix}")

    def initialized(self, instance: str) -> Probe:
        return readiness.initialized(self.paths.server_log(instance, "xrootd"), "xrootd")

    def readiness(self) -> list[Readiness]:
        probe = self.probe_file
        checks = [
            Readiness(
                ("relays",), (readiness.relays_answer(self.paths.relay_control, self.relay_names),)
            ),
            Readiness(("gridftp",), (readiness.ftp_banner(self.port("local-ftp")),)),
            self.issuer_readiness(),
        ]
        for site in SITES:
            root, http = self.site_ports(site)
            relayed = ("relays",) if self.profile.relayed(site) else ()
            checks.append(
                Readiness(
                    (f"xrootd-{site}", *relayed),
                    (
                        self.initialized(site),
                        readiness.tcp_listens(root),
                        readiness.tcp_listens(http),
                        readiness.xrootd_stat(self.port(f"{site}-root"), probe.path, probe.size),
                        readiness.http_head(self.port(f"{site}-http"), probe.path, probe.size),
                    ),
                )
            )
        for server, own in self.fed_files.items():
            checks.append(
                Readiness(
                    (f"xrootd-{server}", f"cmsd-{server}", "xrootd-redirector", "cmsd-redirector"),
                    (
                        self.initialized(server),
                        self.initialized("redirector"),
                        readiness.tcp_listens(self.port(f"{server}-root")),
                        readiness.tcp_listens(self.port("redirector-root")),
                        readiness.xrootd_stat(self.port(f"{server}-root"), own.path, own.size),
                        readiness.xrootd_stat(self.port("redirector-root"), own.path, own.size),
                    ),
                )
            )
        return checks

    def issuer_readiness(self) -> Readiness:
        client = self.credentials.oauth_client()
        tls = readiness.tls_context(self.credentials.authority.ca_cert)
        return Readiness(
            ("issuer",),
            (
                readiness.path_exists(self.paths.issuer_ready),
                readiness.issuer_grants(
                    client["token_url"], tls, client["client_id"], client["client_secret"]
                ),
            ),
        )

    def authenticated_readiness(self) -> list[Readiness]:
        """At each site a token reads through the token site's roots and https, a proxy
        through the GSI site's root (gsi) and https: TLS, the issuer's keys and the
        grid-mapfile all work. Four checks per site, so that they run side by side."""
        return [
            check
            for site in SITES
            for check in (*self.token_readiness(site), *self.gsi_readiness(site))
        ]

    def token_readiness(self, site: str) -> tuple[Readiness, Readiness]:
        probe, paths, authority = self.probe_file, self.paths, self.credentials.authority
        port, names = self.port(f"{site}-token"), self.site_servers(site, "token")
        bearer = {"Authorization": f"Bearer {paths.probe_token.read_text().strip()}"}
        env = {
            "BEARER_TOKEN_FILE": str(paths.probe_token),
            "X509_CERT_DIR": str(authority.ca_dir),
            "XrdSecPROTOCOL": "ztn",
        }
        tls = readiness.tls_context(authority.ca_cert)
        return (
            Readiness(
                names,
                (
                    *self.listens(site, "token"),
                    readiness.xrootd_stat(port, probe.path, probe.size, scheme="roots", env=env),
                ),
            ),
            Readiness(
                names,
                (
                    *self.listens(site, "token"),
                    readiness.http_head(port, probe.path, probe.size, tls=tls, headers=bearer),
                ),
            ),
        )

    def gsi_readiness(self, site: str) -> tuple[Readiness, Readiness]:
        probe, paths, authority = self.probe_file, self.paths, self.credentials.authority
        port, names = self.port(f"{site}-gsi"), self.site_servers(site, "gsi")
        env = {
            "X509_USER_PROXY": str(paths.probe_proxy),
            "X509_CERT_DIR": str(authority.ca_dir),
            "XrdSecPROTOCOL": "gsi",
        }
        tls = readiness.tls_context(authority.ca_cert, paths.probe_proxy)
        return (
            Readiness(
                names,
                (
                    *self.listens(site, "gsi"),
                    readiness.xrootd_stat(port, probe.path, probe.size, host=GSI_HOST, env=env),
                ),
            ),
            Readiness(
                names,
                (
                    *self.listens(site, "gsi"),
                    readiness.http_head(port, probe.path, probe.size, tls=tls, host=GSI_HOST),
                ),
            ),
        )

    def site_servers(self, site: str, service: str) -> tuple[str, ...]:
        relayed = ("relays",) if self.profile.relayed(site) else ()
        return (f"xrootd-{site}-{service}", *relayed)

    def listens(self, site: str, service: str) -> tuple[Probe, Probe]:
        """The site's xrootd has started and listens (behind its relay, if any)."""
        return (
            self.initialized(f"{site}-{service}"),
            readiness.tcp_listens(self.backend(site, service)),
        )

    def xcache_readiness(self) -> Readiness:
        probe = self.probe_file
        return Readiness(
            ("xrootd-xcache", "xrootd-far", "relays"),
            (
                self.initialized("xcache"),
                readiness.tcp_listens(self.port("xcache-root")),
                readiness.xrootd_stat(self.port("xcache-root"), probe.path, probe.size),
            ),
        )

    @property
    def relay_names(self) -> set[str]:
        return {spec.name for spec in self.relays}

    def start(self, process: ServerProcess) -> str:
        env = readiness.client_env(dict(process.env))
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")])
        )
        pid = spawn(process, self.paths.pids, self.paths.output(process.name), self.paths.home, env)
        self.started[process.name] = pid
        self.processes[process.name] = process
        return process.name

    def wait(self, checks: Sequence[Readiness]) -> None:
        with ThreadPoolExecutor(max_workers=len(checks)) as pool:
            self.finish(self.begin(pool, checks))

    def begin(self, pool: ThreadPoolExecutor, checks: Sequence[Readiness]) -> list[Check]:
        return [pool.submit(self.wait_one, check) for check in checks]

    def finish(self, checks: Sequence[Check]) -> None:
        failures = [failure for check in checks if (failure := check.result()) is not None]
        if failures:
            # A port found free before the start was taken before a server bound it (another
            # lab starting beside this one): PortTaken, so a caller may try another block.
            taken = any(_ADDRESS_IN_USE in failure.lower() for failure in failures)
            raise (PortTaken if taken else LabError)("\n".join(failures))

    def wait_one(self, check: Readiness) -> str | None:
        for probe in check.probes:
            while (reason := probe()) is not None:
                if self.given_up.is_set():
                    return f"{check.servers[0]}: not checked further"
                if (dead := self.dead_server(check.servers)) is not None:
                    return dead
                if time.monotonic() > self.deadline:
                    return self.failure(
                        check.servers[0], f"not ready after {READY_TIMEOUT_S:g} s: {reason}"
                    )
                time.sleep(_POLL_S)
        return None

    def dead_server(self, names: Sequence[str]) -> str | None:
        for name in names:
            with self.restart_lock:
                pid = self.started.get(name)
                if pid is None or is_alive(pid, self.marker):
                    continue
                status = exit_status(pid)
                if not self.may_restart(name, status):
                    return self.failure(name, f"exited (status {status}) during start-up")
                self.restarted.add(name)
                with self.paths.output(name).open("a") as out:
                    out.write(f"fedprobe lab: killed by signal {-(status or 0)}, started again\n")
                self.start(self.processes[name])
        return None

    def may_restart(self, name: str, status: int | None) -> bool:
        """xrootd and cmsd 5.5.3 now and then die of a signal (SIGSEGV) as they start, with
        nothing in their log (seen for XCache, about 1 start in 20 on a loaded VM, and for
        fed-b's cmsd in CI runs): once, each starts again."""
        crashed = status is not None and status < 0
        return crashed and name.startswith(("xrootd-", "cmsd-")) and name not in self.restarted

    def failure(self, name: str, what: str) -> str:
        lines = [f"{name} {what}"]
        process = self.processes.get(name)
        for log in process.logs if process else ():
            excerpt = _log_excerpt(log)
            if excerpt:
                lines += [f"--- {log} (complaints and last lines) ---", *excerpt]
        return "\n".join(lines)


def _log_excerpt(path: Path) -> list[str]:
    """The lines of a log that complain, and its last lines, in order: xrootd states the
    cause of a failed start well before its last lines."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    complaints = [i for i, line in enumerate(lines) if _COMPLAINT.search(line)]
    keep = set(complaints[-_LOG_TAIL_LINES:]) | set(range(len(lines))[-_LOG_TAIL_LINES // 2 :])
    return [lines[i] for i in sorted(keep)]
