"""Address families (docs/engine.md, Address families): a run pinned to IPv4 or IPv6, one run
per address of a dual-stack name, and the family and address the run really used.

The dual-stack name is the test's own: a network namespace whose hosts file gives `dual.test`
both 127.0.0.1 and ::1 (this host's `localhost` has no ::1), with two xrootd servers of the
test's inside it, one listening on IPv4 only (`xrootd -I v4`), one on both. The engine runs
there as users run it: `python -m workers.engine ... --json`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, lab_file
from workers.engine import (
    EgressPolicy,
    ErrorClass,
    InvalidParams,
    RunParams,
    RunStatus,
    run_probe,
    run_probes,
)
from workers.engine.credentials import Access
from workers.engine.families import (
    connected_peers,
    family_of,
    peer_address,
    plain,
    wrong_family,
)
from workers.engine.params import AddressFamily
from workers.engine.results import RunResult, check_run_json
from workers.lab.one_family import one_family_server

NAME = "dual.test"
V4_ONLY_PORT, DUAL_PORT = 21094, 21095
# Each server's XrdHttp port.
HTTP_PORTS = {V4_ONLY_PORT: 28094, DUAL_PORT: 28095}
FILE_BYTES = 1_000_000
START_TIMEOUT_S = 10.0
REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    shutil.which("xrootd") is None or shutil.which("ip") is None or os.geteuid() != 0,
    reason="needs xrootd, ip and root (a network namespace of the test's own)",
)


@dataclass
class DualStackHost:
    """The namespace and its servers: `url(port)` names the test file through `dual.test`."""

    namespace: str

    def url(self, port: int, host: str = NAME, scheme: str = "root") -> str:
        if scheme == "http":
            return f"http://{host}:{HTTP_PORTS[port]}/fedprobe-file"
        return f"root://{host}:{port}//fedprobe-file"

    def probe(self, *args: str) -> Any:
        """`python -m workers.engine ARGS --anonymous --json` in the namespace: its JSON."""
        argv = [sys.executable, "-m", "workers.engine", *args, "--anonymous", "--json"]
        done = subprocess.run(
            ["ip", "netns", "exec", self.namespace, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert done.stdout, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def dual_stack() -> Iterator[DualStackHost]:
    namespace = f"fpaf{os.getpid() % 100000:05d}"
    hosts_dir = Path("/etc/netns") / namespace
    root = Path(tempfile.mkdtemp(prefix="fedprobe-families-", dir="/tmp"))
    servers: list[subprocess.Popen[bytes]] = []
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        hosts_dir.mkdir(parents=True)
        # xrootd needs its own host name to resolve; dual.test has both families.
        (hosts_dir / "hosts").write_text(
            f"127.0.0.1 localhost {socket.gethostname()}\n127.0.0.1 {NAME}\n::1 {NAME}\n"
        )
        data = root / "data"
        data.mkdir()
        (data / "fedprobe-file").write_bytes(os.urandom(FILE_BYTES))
        for path in (root, data):
            path.chmod(0o755)
        (data / "fedprobe-file").chmod(0o644)
        for port, only in ((V4_ONLY_PORT, ["-I", "v4"]), (DUAL_PORT, [])):
            config = root / f"xrootd-{port}.cfg"
            config.write_text(
                f"all.export /\noss.localroot {data}\nxrd.port {port}\n"
                f"xrd.protocol XrdHttp:{HTTP_PORTS[port]} libXrdHttp.so\n"
            )
            config.chmod(0o644)
            argv = ["xrootd", *only, "-c", str(config), "-R", "nobody"]
            with (root / f"xrootd-{port}.log").open("wb") as log:
                servers.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", namespace, *argv], stdout=log, stderr=log
                    )
                )
        for port in (V4_ONLY_PORT, DUAL_PORT, *HTTP_PORTS.values()):
            _wait_listening(namespace, port)
        yield DualStackHost(namespace)
    finally:
        for server in servers:
            with contextlib.suppress(ProcessLookupError):
                server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        subprocess.run(["ip", "netns", "del", namespace], check=False)
        shutil.rmtree(hosts_dir, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _wait_listening(namespace: str, port: int) -> None:
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 1).close()"
    give_up = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < give_up:
        done = subprocess.run(
            ["ip", "netns", "exec", namespace, sys.executable, "-c", probe],
            capture_output=True,
            check=False,
        )
        if done.returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"xrootd on port {port} did not start")


def _run_error(run: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in run["errors"] if e["client"] is None)


# -- a dual-stack name whose service listens on IPv4 only -----------------------------------


def test_pinned_to_ipv6_fails_when_the_service_listens_on_ipv4_only(
    dual_stack: DualStackHost,
) -> None:
    run = dual_stack.probe(dual_stack.url(V4_ONLY_PORT), "--address-family", "6")
    assert run["status"] == "failed"
    assert run["address_family"] == "6"
    assert run["address"] is None  # nothing was connected to
    error = _run_error(run)
    assert error["class"] == "refused"
    assert "over IPv6" in error["message"]
    assert run["clients"] == []


def test_pinned_to_ipv4_passes_and_says_so(dual_stack: DualStackHost) -> None:
    run = dual_stack.probe(dual_stack.url(V4_ONLY_PORT), "--address-family", "4", "--clients", "2")
    assert run["status"] == "succeeded"
    assert run["params"]["address_family"] == "4"
    assert run["address_family"] == "4"
    assert run["address"] == "127.0.0.1"
    assert [c["address"] for c in run["clients"]] == ["127.0.0.1", "127.0.0.1"]


def test_each_gives_one_run_per_address_saying_which(dual_stack: DualStackHost) -> None:
    runs = dual_stack.probe(dual_stack.url(V4_ONLY_PORT), "--address-family", "each")
    assert isinstance(runs, list)
    by_family = {run["params"]["address_family"]: run for run in runs}
    assert sorted(by_family) == ["4", "6"]
    v4, v6 = by_family["4"], by_family["6"]
    assert v4["status"] == "succeeded"
    assert (v4["address_family"], v4["address"]) == ("4", "127.0.0.1")
    assert v6["status"] == "failed"
    assert (v6["address_family"], v6["address"]) == ("6", None)
    assert "over IPv6 to ::1" in _run_error(v6)["message"]


# -- a dual-stack service ---------------------------------------------------------------------


def test_pinned_to_ipv6_on_a_dual_stack_server_goes_over_ipv6(dual_stack: DualStackHost) -> None:
    run = dual_stack.probe(dual_stack.url(DUAL_PORT), "--address-family", "6")
    assert run["status"] == "succeeded"
    assert (run["address_family"], run["address"]) == ("6", "::1")
    assert [c["address"] for c in run["clients"]] == ["::1"]


def test_each_on_a_dual_stack_server_passes_over_both(dual_stack: DualStackHost) -> None:
    runs = dual_stack.probe(dual_stack.url(DUAL_PORT), "--address-family", "each")
    used = sorted((run["status"], run["address_family"], run["address"]) for run in runs)
    assert used == [("succeeded", "4", "127.0.0.1"), ("succeeded", "6", "::1")]


def test_copies_with_xrdcp_are_pinned_too(dual_stack: DualStackHost) -> None:
    for family, address in (("6", "::1"), ("4", "127.0.0.1")):
        run = dual_stack.probe(
            dual_stack.url(DUAL_PORT), "--address-family", family, "--method", "copy"
        )
        assert run["status"] == "succeeded", run["errors"]
        assert (run["address_family"], run["address"]) == (family, address)


def test_any_records_what_the_library_chose(dual_stack: DualStackHost) -> None:
    run = dual_stack.probe(dual_stack.url(DUAL_PORT))
    assert run["status"] == "succeeded"
    assert run["address"] in ("127.0.0.1", "::1")
    assert run["address_family"] == ("6" if run["address"] == "::1" else "4")


def test_a_host_without_an_address_of_the_family_fails_before_any_request(
    dual_stack: DualStackHost,
) -> None:
    run = dual_stack.probe(dual_stack.url(DUAL_PORT, host="127.0.0.1"), "--address-family", "6")
    assert run["status"] == "failed"
    assert run["file_sizes"] == {}  # not even the preflight's stat
    error = _run_error(run)
    assert error["class"] == "refused"
    assert error["message"] == "no IPv6 address for host 127.0.0.1 (it has 127.0.0.1)"


# -- HTTP: the engine's own connection code -------------------------------------------------


def test_http_pinned_to_each_family(dual_stack: DualStackHost) -> None:
    v4_only = dual_stack.url(V4_ONLY_PORT, scheme="http")
    failed = dual_stack.probe(v4_only, "--address-family", "6")
    assert failed["status"] == "failed"
    assert (failed["address_family"], failed["address"]) == ("6", None)
    assert "over IPv6" in _run_error(failed)["message"]
    passed = dual_stack.probe(v4_only, "--address-family", "4")
    assert passed["status"] == "succeeded", passed["errors"]
    assert (passed["address_family"], passed["address"]) == ("4", "127.0.0.1")
    dual = dual_stack.probe(dual_stack.url(DUAL_PORT, scheme="http"), "--address-family", "6")
    assert dual["status"] == "succeeded", dual["errors"]
    assert (dual["address_family"], dual["address"]) == ("6", "::1")
    assert [c["address"] for c in dual["clients"]] == ["::1"]


def test_http_each_pins_each_address(dual_stack: DualStackHost) -> None:
    runs = dual_stack.probe(dual_stack.url(V4_ONLY_PORT, scheme="http"), "--address-family", "each")
    used = sorted((run["status"], run["params"]["address_family"], run["address"]) for run in runs)
    assert used == [("failed", "6", None), ("succeeded", "4", "127.0.0.1")]


def test_a_pinned_http_run_is_still_held_to_the_egress_policy(lab: Any) -> None:
    """The lab's XrdHttp listens on ::1 too: the pinned address is what the policy judges."""
    url, _ = lab_file(lab, "local-http", FILE_4M)
    over_v6 = url.replace("127.0.0.1", "[::1]")
    assert over_v6 != url
    pinned = RunParams(urls=(over_v6,), address_family=AddressFamily.IPV6)
    refused = run_probe(replace(pinned, egress=EgressPolicy.allowing(["127.0.0.0/8"])))
    assert refused.run_error is not None
    assert refused.run_error[0] == ErrorClass.EGRESS
    allowed = run_probe(replace(pinned, egress=EgressPolicy.allowing(["::1/128"])))
    assert allowed.status == RunStatus.SUCCEEDED, allowed.to_json()["errors"]
    assert (allowed.address_family, allowed.address) == ("6", "::1")


# -- the lab: its one-family server and its servers on both families -------------------------


def test_the_labs_ipv4_only_server_over_each_family(lab: Any) -> None:
    with one_family_server(lab, "4") as endpoint:
        url = endpoint.file_url(FILE_4M)
        over_v6 = url.replace("127.0.0.1", "[::1]")
        refused = run_probe(RunParams(urls=(over_v6,), address_family=AddressFamily.IPV6))
        assert refused.status == RunStatus.FAILED
        assert refused.run_error is not None
        assert refused.run_error[0] == ErrorClass.REFUSED
        assert (refused.address_family, refused.address) == ("6", None)
        passed = run_probe(RunParams(urls=(url,), address_family=AddressFamily.IPV4))
        assert passed.status == RunStatus.SUCCEEDED
        assert (passed.address_family, passed.address) == ("4", "127.0.0.1")


def test_the_labs_relay_over_ipv6(relay_to: Any) -> None:
    """The lab's relays listen on ::1 too: a pinned run through one says ::1."""
    _, url = relay_to("local-root", FILE_4M)
    run = run_probe(
        RunParams(urls=(url.replace("127.0.0.1", "[::1]"),), address_family=AddressFamily.IPV6)
    )
    assert run.status == RunStatus.SUCCEEDED, run.to_json()["errors"]
    assert (run.address_family, run.address) == ("6", "::1")


# -- in this process -----------------------------------------------------------------------


def test_a_protocol_that_cannot_be_pinned_is_refused_naming_the_field(tmp_path: Path) -> None:
    local = tmp_path / "file"
    local.write_bytes(b"x" * 1024)
    params = RunParams(
        urls=(local.as_uri(),), address_family=AddressFamily.IPV4, file_roots=(str(tmp_path),)
    )
    with pytest.raises(InvalidParams) as raised:
        run_probes(params)
    assert raised.value.field == "address_family"


def test_each_needs_the_urls_of_one_server() -> None:
    params = RunParams(
        urls=("root://127.0.0.1:1094//a", "root://127.0.0.2:1094//b"),
        address_family=AddressFamily.EACH,
    )
    with pytest.raises(InvalidParams) as raised:
        run_probes(params)
    assert raised.value.field == "address_family"


@pytest.mark.parametrize(("host", "family"), [("127.0.0.1", "4"), ("::1", "6")])
def test_the_peer_address_is_read_from_the_process_sockets(host: str, family: str) -> None:
    kind = socket.AF_INET if family == "4" else socket.AF_INET6
    with socket.socket(kind) as server:
        server.bind((host, 0))
        server.listen()
        port = server.getsockname()[1]
        # Nothing at this new port yet (peer_address would fall back to this test process's
        # other connections: a reused test worker has some).
        assert connected_peers(port) == []
        with socket.create_connection((host, port)) as client:
            accepted, _ = server.accept()
            with accepted:
                assert client.getpeername()[1] == port
                assert peer_address(port) == host
                assert str(family_of(connected_peers(port)[0])) == family


def test_an_ipv4_peer_of_a_dual_stack_socket_counts_as_ipv4() -> None:
    mapped = ipaddress.ip_address("::ffff:127.0.0.1")
    assert family_of(mapped) == AddressFamily.IPV4
    assert str(plain(mapped)) == "127.0.0.1"


def test_a_pinned_run_that_went_over_the_other_family_does_not_count() -> None:
    used = [("the preflight", "::1"), ("client 1", "127.0.0.1")]
    wrong = wrong_family(AddressFamily.IPV6, used)
    assert wrong is not None
    assert "client 1 connected to 127.0.0.1 over IPv4" in wrong
    assert wrong_family(AddressFamily.IPV6, used[:1]) is None
    assert wrong_family(AddressFamily.ANY, used) is None


def test_the_copy_tools_environment_pins_the_family() -> None:
    env: dict[str, str] = {}
    Access(address_family="6").apply_environment(env)
    assert env["XRD_NETWORKSTACK"] == "IPv6"
    env = {}
    Access().apply_environment(env)
    assert "XRD_NETWORKSTACK" not in env


def test_an_older_agents_report_without_addresses_is_accepted() -> None:
    params = RunParams(urls=("root://127.0.0.1:1094//f",))
    run = RunResult(params, started_at="2026-11-29T06:00:00", host="h", deadline_s=0).to_json()
    assert (run["address_family"], run["address"]) == (None, None)
    older = {k: v for k, v in run.items() if k not in ("address_family", "address")}
    assert check_run_json(older) == older
    with pytest.raises(InvalidParams, match="address"):
        check_run_json({**run, "address": 6})
