"""The lab federation against its real servers: xrootd, XrdHttp, cmsd, XCache, GridFTP, relays."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from XRootD import client as xrd

from workers.lab import PROFILES, Lab, LabError, parse_size, servers
from workers.lab import lab as lab_module
from workers.lab.errors import PortTaken
from workers.lab.files import MiB, ensure_files, lab_file_path
from workers.lab.launch import relay_specs
from workers.lab.ports import PortLayout, free_base_port, port_is_free
from workers.lab.profiles import Profile

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[3]
FILE = "/fedprobe/file-4M"
SITES = ("local", "near", "far")
AUTHENTICATED_KINDS = {"roots": "roots", "https": "https", "gsi-root": "root", "gsi-https": "https"}
AUTHENTICATED = {f"{site}-{kind}" for site in SITES for kind in AUTHENTICATED_KINDS} | {
    "local-davs"
}
ENDPOINTS = {
    "local-root": ("local", "root", "data"),
    "local-http": ("local", "http", "data"),
    "near-root": ("near", "root", "data"),
    "near-http": ("near", "http", "data"),
    "far-root": ("far", "root", "data"),
    "far-http": ("far", "http", "data"),
    "local-file": ("local", "file", "data"),
    "local-ftp": ("local", "ftp", "data"),
    "redirector-root": ("federation", "root", "redirector"),
    "fed-a-root": ("fed-a", "root", "data"),
    "fed-b-root": ("fed-b", "root", "data"),
    "xcache-root": ("xcache", "root", "cache"),
    **{
        f"{site}-{kind}": (site, protocol, "data")
        for site in SITES
        for kind, protocol in AUTHENTICATED_KINDS.items()
    },
    "local-davs": ("local", "davs", "data"),
}
ROOT_ENDPOINTS = [
    name
    for name, (_, protocol, _) in ENDPOINTS.items()
    if protocol == "root" and name not in AUTHENTICATED
]


def on_disk(lab: Lab, path: str, site: str = "local") -> bytes:
    return (lab.data_dir(site) / path.lstrip("/")).read_bytes()


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def runs(pid: int) -> bool:
    """Is `pid` a live process? (Orphans end as zombies where init does not reap them.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def run_cli(*args: str, via: str = "module") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "manage.py", "lab"] if via == "manage" else [
        sys.executable, "-m", "workers.lab"
    ]  # fmt: skip
    return subprocess.run(
        [*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


# -- sizes and files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [("4096", 4096), ("4k", 4096), ("16M", 16 * MiB), ("1G", 1024 * MiB), ("16MiB", 16 * MiB)],
)
def test_parse_size_reads_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "12q", "-1M", "0", "1.5M", "M"])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


def test_test_files_are_reproducible_and_generated_once(tmp_path: Path) -> None:
    wanted = [("/fedprobe/file-64k", 64 * 1024), ("/fedprobe/file-1M", MiB)]
    first = ensure_files(tmp_path / "a", wanted, tmp_path / "a.json", None)
    written = [(tmp_path / "a" / p.lstrip("/")).stat().st_mtime_ns for p, _ in wanted]
    again = ensure_files(tmp_path / "a", wanted, tmp_path / "a.json", None)
    elsewhere = ensure_files(tmp_path / "b", wanted, tmp_path / "b.json", None)
    assert first == again == elsewhere
    assert [(tmp_path / "a" / p.lstrip("/")).stat().st_mtime_ns for p, _ in wanted] == written
    for lab_file in first:
        data = (tmp_path / "a" / lab_file.path.lstrip("/")).read_bytes()
        assert len(data) == lab_file.size
        assert lab_file.adler32 == f"{zlib.adler32(data):08x}"


def test_a_test_file_that_changed_on_disk_is_generated_again(tmp_path: Path) -> None:
    wanted = [("/fedprobe/file-64k", 64 * 1024)]
    (original,) = ensure_files(tmp_path, wanted, tmp_path / "files.json", None)
    (tmp_path / "fedprobe/file-64k").write_bytes(b"truncated")
    (regenerated,) = ensure_files(tmp_path, wanted, tmp_path / "files.json", None)
    assert regenerated == original
    assert (tmp_path / "fedprobe/file-64k").stat().st_size == 64 * 1024


# -- bad input ---------------------------------------------------------------------------------


def test_unknown_profile_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="unknown profile 'lan'") as caught:
        Lab(tmp_path, profile="lan")
    assert all(name in str(caught.value) for name in PROFILES)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--profile", "lan"], "--profile"),
        (["--file-size", "12q"], "--file-size"),
        (["--base-port", "80"], "--base-port"),
        (["--base-port", "http"], "--base-port"),
    ],
)
def test_cli_names_the_option_it_refuses(tmp_path: Path, args: list[str], option: str) -> None:
    done = run_cli("up", "--dir", str(tmp_path), *args)
    assert done.returncode == 2
    assert f"argument {option}:" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_taken_port_is_named_before_anything_starts(tmp_path: Path) -> None:
    base = free_base_port()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + 3))
        squatter.listen()
        with pytest.raises(PortTaken, match=f"port {base + 3} \\(near-http\\).*--base-port"):
            Lab(tmp_path / "lab", base_port=base).up()
    assert not (tmp_path / "lab" / "run").exists()


def test_a_port_taken_after_the_check_is_port_taken_and_stops_the_others(
    lab_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another lab starting beside this one may bind a port between the check and xrootd's
    own bind: PortTaken (which tests/conftest.py's _start_lab answers with another block),
    not a bare LabError, and nothing of this lab left running."""
    base = free_base_port()
    squatter = socket.socket()

    def check_then_taken(layout: PortLayout) -> None:
        real_check(layout)
        squatter.bind(("127.0.0.1", base))  # local-root's port, the first xrootd to start
        squatter.listen()

    real_check = lab_module.check_ports_free
    monkeypatch.setattr(lab_module, "check_ports_free", check_then_taken)
    late = Lab(lab_dir, base_port=base, file_sizes=[64 * 1024])
    late.progress = None
    with squatter, pytest.raises(PortTaken, match="address already in use"):
        late.up()
    assert late.running_processes() == {}


def test_a_block_is_never_handed_out_twice_by_one_process() -> None:
    """The test below leaves TIME_WAIT connections of a socket without SO_REUSEADDR on its
    port, which a lab's xrootd could not bind for a minute (seen: 'address already in use'
    at start-up): a lab started after it never gets that block."""
    bases = [free_base_port() for _ in range(20)]
    assert len(set(bases)) == len(bases)


def test_a_port_held_only_by_connections_in_time_wait_is_free() -> None:
    port = free_base_port()
    # Without SO_REUSEADDR, as the GridFTP server's data sockets: even a SO_REUSEADDR bind of
    # the port fails while the connection it accepted is in TIME_WAIT.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server closes first: its side goes to TIME_WAIT
            client.recv(1)
    assert port in _time_wait_ports()
    assert port_is_free(port)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port + 1))
        squatter.listen()
        assert not port_is_free(port + 1)


def test_a_lab_dir_the_servers_cannot_reach_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the servers run as the caller: no other user needs to reach the dir")
    hidden = Path(tempfile.mkdtemp(dir="/tmp"))  # mode 0700
    try:
        with pytest.raises(LabError, match=f"{hidden} is not searchable by user nobody"):
            Lab(hidden / "lab", base_port=free_base_port()).up()
    finally:
        hidden.rmdir()  # nothing was made in it


# -- the running lab ---------------------------------------------------------------------------


def test_every_endpoint_is_listed_with_the_contract_fields(lab: Lab) -> None:
    listed = {e.name: e for e in lab.endpoints()}
    assert {n: (e.site, e.protocol, e.role) for n, e in listed.items()} == ENDPOINTS
    for endpoint in listed.values():
        assert set(endpoint.to_json()) == {
            "name", "site", "protocol", "role", "url", "rtt_ms", "files", "tls", "auth", "ca_dir",
            "bandwidth_mbps", "scratch_path", "families", "tpc",
        }  # fmt: skip
        assert FILE in {f.path for f in endpoint.files}
        assert endpoint.ca_dir == str(lab.ca_dir())
        assert (endpoint.auth == "none") == (endpoint.name not in AUTHENTICATED)
    assert listed["fed-a-root"].files[0].path == "/fed/a-4M"
    assert listed["fed-b-root"].files[0].path == "/fed/b-4M"
    assert {"/fed/a-4M", "/fed/b-4M"} <= {f.path for f in listed["redirector-root"].files}


def test_rtts_are_the_profiles(lab: Lab) -> None:
    rtt = PROFILES["test"].rtt_ms
    for endpoint in lab.endpoints():
        assert endpoint.rtt_ms == rtt.get(endpoint.site, 0.0)
        assert endpoint.bandwidth_mbps is None  # the test profile's links are unlimited


def test_a_capped_site_gets_relays_sharing_one_link_even_at_0_ms() -> None:
    capped = Profile("capped", "", {"local": 0.0, "near": 2.0, "far": 0.0}, {"local": 50.0})
    layout = PortLayout(23000)
    specs = {spec.name: spec for spec in relay_specs(layout, capped)}
    assert {name.split("-")[0] for name in specs} == {"local", "near"}  # not far: 0 ms, no cap
    local = [spec for spec in specs.values() if spec.name.startswith("local-")]
    assert len(local) == 4
    assert {(spec.link, spec.bandwidth_mbps, spec.rtt_ms) for spec in local} == {
        ("local", 50.0, 0.0)
    }
    assert specs["local-root"].listen_port == layout.port("local-root")
    assert specs["local-root"].target_port == layout.port("local-root-backend")
    assert {spec.bandwidth_mbps for spec in specs.values() if spec.link == "near"} == {None}


def test_the_paper_profile_caps_every_site_link() -> None:
    paper = PROFILES["paper"]
    assert dict(paper.bandwidth_mbps) == {"local": 100.0, "near": 8.0, "far": 5.0}
    specs = relay_specs(PortLayout(23000), paper)
    assert {spec.link: spec.bandwidth_mbps for spec in specs} == dict(paper.bandwidth_mbps)


def test_file_checksums_match_the_bytes_on_disk(lab: Lab) -> None:
    for lab_file in lab.endpoint("local-file").files:
        data = on_disk(lab, lab_file.path)
        assert (len(data), f"{zlib.adler32(data):08x}") == (lab_file.size, lab_file.adler32)


@pytest.mark.parametrize("name", ROOT_ENDPOINTS)
def test_root_endpoints_serve_the_bytes_on_disk(lab: Lab, name: str) -> None:
    url = lab.endpoint(name).file_url(FILE)
    expected = on_disk(lab, FILE)
    status, info = xrd.FileSystem(lab.endpoint(name).url).stat(FILE)
    assert status.ok, status.message
    assert info.size == len(expected)
    with xrd.File() as remote:
        status, _ = remote.open(url)
        assert status.ok, status.message
        status, data = remote.read(3 * MiB + 17, 100_000)
    assert status.ok, status.message
    assert data == expected[3 * MiB + 17 : 3 * MiB + 17 + 100_000]


@pytest.mark.parametrize("name", ["local-http", "near-http", "far-http"])
def test_http_endpoints_serve_byte_ranges(lab: Lab, name: str) -> None:
    response = httpx.get(
        lab.endpoint(name).file_url(FILE), headers={"Range": "bytes=1000-5095"}, timeout=10
    )
    assert response.status_code == 206
    assert response.content == on_disk(lab, FILE)[1000:5096]


def test_gridftp_copy_has_the_manifest_checksum(lab: Lab, tmp_path: Path) -> None:
    endpoint = lab.endpoint("local-ftp")
    (info,) = [f for f in endpoint.files if f.path == FILE]
    done = subprocess.run(
        ["globus-url-copy", endpoint.file_url(FILE), f"file://{tmp_path}/copy"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"{zlib.adler32((tmp_path / 'copy').read_bytes()):08x}" == info.adler32


def test_file_endpoint_urls_name_the_files_on_disk(lab: Lab) -> None:
    url = lab.endpoint("local-file").file_url(FILE)
    assert url.startswith("file:///")
    assert Path(urlsplit(url).path).read_bytes() == on_disk(lab, FILE)


@pytest.mark.parametrize("server", ["fed-a", "fed-b"])
def test_redirector_sends_each_file_to_the_server_that_holds_it(lab: Lab, server: str) -> None:
    own = lab.endpoint(f"{server}-root").files[0]
    with xrd.File() as remote:
        status, _ = remote.open(lab.endpoint("redirector-root").file_url(own.path))
        assert status.ok, status.message
        served_by = remote.get_property("DataServer")
        _, data = remote.read(0, 4096)
    assert served_by.endswith(f":{port_of(lab.endpoint(f'{server}-root').url)}")
    assert data == on_disk(lab, own.path, site=server)[:4096]


def test_xcache_fills_its_cache_from_the_far_site(lab: Lab) -> None:
    path = f"/fedprobe/xcache-{time.time_ns()}"
    data = os.urandom(3 * MiB)
    fresh = lab.data_dir("far") / path.lstrip("/")
    fresh.write_bytes(data)
    fresh.chmod(0o644)
    far_before = lab.relay_stats()["far-root"]["bytes_down"]
    try:
        with xrd.File() as remote:
            status, _ = remote.open(lab.endpoint("xcache-root").file_url(path))
            assert status.ok, status.message
            _, block = remote.read(MiB + 10, 4096)
    finally:
        fresh.unlink()
    assert block == data[MiB + 10 : MiB + 10 + 4096]
    # pfc.blocksize 1M: a cold 4 KiB read pulls its whole 1 MiB block across the far relay.
    assert int(str(lab.relay_stats()["far-root"]["bytes_down"])) - int(str(far_before)) >= MiB
    assert (lab.state_dir / "xcache" / path.lstrip("/")).exists()


@pytest.mark.parametrize("name", ["local-root", "local-http"])
def test_servers_turn_away_clients_that_are_not_127_0_0_1(lab: Lab, name: str) -> None:
    # 127.0.0.2 is loopback too, but not in xrd.allow: the server must drop it unanswered.
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port_of(lab.endpoint(name).url)))
        sock.sendall(b"HEAD / HTTP/1.0\r\n\r\n" if name.endswith("http") else bytes(20))
        try:
            answer = sock.recv(100)
        except ConnectionResetError:
            answer = b""
    assert answer == b""


def test_a_file_dropped_in_a_data_dir_is_served(lab: Lab) -> None:
    path = f"/fedprobe/dropped-{time.time_ns()}"
    fresh = lab.data_dir("near") / path.lstrip("/")
    fresh.write_bytes(b"fresh bytes")
    fresh.chmod(0o644)
    try:
        response = httpx.get(lab.endpoint("near-http").file_url(path), timeout=10)
    finally:
        fresh.unlink()
    assert response.content == b"fresh bytes"


# -- relays ------------------------------------------------------------------------------------


def test_only_sites_with_an_rtt_have_relays(lab: Lab) -> None:
    assert set(lab.relay_stats()) == {
        f"{site}-{service}" for site in SITES[1:] for service in ("root", "http", "token", "gsi")
    }


@pytest.mark.parametrize("name", ["near-http", "far-http"])
def test_relays_add_at_least_their_rtt_to_each_request(lab: Lab, name: str) -> None:
    endpoint = lab.endpoint(name)
    conn = http.client.HTTPConnection("127.0.0.1", port_of(endpoint.url), timeout=10)
    took = []
    try:
        for _ in range(3):
            started = time.perf_counter()
            conn.request("HEAD", FILE)
            conn.getresponse().read()
            took.append(time.perf_counter() - started)
    finally:
        conn.close()
    assert min(took) >= endpoint.rtt_ms / 1000


def test_relays_count_the_bytes_they_carry(lab: Lab) -> None:
    before = lab.relay_stats()["far-http"]
    response = httpx.get(lab.endpoint("far-http").file_url("/fedprobe/file-1M"), timeout=10)
    after = lab.relay_stats()["far-http"]
    assert len(response.content) == MiB
    assert int(str(after["bytes_down"])) - int(str(before["bytes_down"])) > MiB
    assert int(str(after["bytes_up"])) > int(str(before["bytes_up"]))
    assert int(str(after["connections_total"])) == int(str(before["connections_total"])) + 1


def test_a_cut_relay_fails_requests_until_set_back_to_normal(lab: Lab) -> None:
    url = lab.endpoint("near-http").file_url("/fedprobe/file-1M")
    lab.set_relay_mode("near-http", "cut", cut_after=0)
    try:
        with pytest.raises(httpx.TransportError):
            httpx.get(url, timeout=10)
        assert lab.relay_stats()["near-http"]["mode"] == "cut"
    finally:
        lab.set_relay_mode("near-http", "normal")
    assert httpx.get(url, timeout=10).status_code == 200


def test_a_hanging_relay_can_spare_the_connection_furthest_ahead(lab: Lab) -> None:
    url = lab.endpoint("near-http").file_url("/fedprobe/file-1M")
    with httpx.Client(timeout=10) as ahead:
        assert len(ahead.get(url).content) == MiB  # its connection stays open, 1 MiB ahead
        lab.set_relay_mode("near-http", "hang", spare=1)
        try:
            assert lab.relay_stats()["near-http"]["spare"] == 1
            assert len(ahead.get(url).content) == MiB
            with pytest.raises(httpx.TimeoutException):
                httpx.get(url, timeout=0.5)
        finally:
            lab.set_relay_mode("near-http", "normal")
    assert httpx.get(url, timeout=10).status_code == 200


def test_unknown_relays_and_modes_are_refused(lab: Lab) -> None:
    with pytest.raises(LabError, match="no relay 'local-root'"):
        lab.set_relay_mode("local-root", "hang")
    with pytest.raises(LabError, match="unknown relay mode 'slow'"):
        lab.set_relay_mode("far-root", "slow")


# -- life cycle and command line ---------------------------------------------------------------


def test_up_refuses_a_lab_that_runs(lab: Lab) -> None:
    with pytest.raises(LabError, match=f"lab already running in {lab.state_dir}"):
        Lab(lab.state_dir).up()


def test_status_json_lists_the_endpoints_as_the_design_says(lab: Lab) -> None:
    done = run_cli("status", "--json", "--dir", str(lab.state_dir), via="manage")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [e.to_json() for e in lab.endpoints()]


def test_status_table_shows_each_url_with_its_rtt(lab: Lab) -> None:
    done = run_cli("status", "--dir", str(lab.state_dir))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for endpoint in lab.endpoints():
        (line,) = [x for x in lines if x.startswith(f"{endpoint.name} ")]
        assert endpoint.url in line
        assert f"{endpoint.rtt_ms:g} ms" in line
        assert " - " in line  # the link column: unlimited in the test profile


@pytest.fixture
def lab_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="fedprobe-cli-lab-", dir="/tmp"))
    yield folder
    Lab(folder).down()
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_a_server_that_fails_to_start_stops_the_others_and_shows_its_log(
    lab_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def xcache_config(*args: Any) -> str:
        # XrdPfc refuses less than 1 GiB of RAM: the real xrootd stops at configuration.
        return real_xcache_config(*args) + "pfc.ram 64m\n"

    real_xcache_config = servers.xcache_config
    monkeypatch.setattr(servers, "xcache_config", xcache_config)
    failing = Lab(lab_dir, base_port=free_base_port(), file_sizes=[64 * 1024])
    failing.progress = None
    with pytest.raises(LabError, match="xrootd-xcache exited") as caught:
        failing.up()
    assert not isinstance(caught.value, PortTaken)
    assert "may not be less than 1073741824" in str(caught.value)
    assert failing.running_processes() == {}
    assert not failing.is_running()


def test_an_xrootd_killed_by_a_signal_as_it_starts_is_started_once_more(
    lab_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed = lab_dir / "crashed-once"

    def xrootd(*args: Any) -> servers.ServerProcess:
        process = real_xrootd(*args)
        if process.name != "xrootd-xcache":
            return process
        # As xrootd 5.5.3 now and then does: a SIGSEGV before it has written a line.
        script = f'[ -e {crashed} ] || {{ touch {crashed}; kill -SEGV $$; }}; exec "$@"'
        return replace(process, argv=("sh", "-c", script, "sh", *process.argv))

    real_xrootd = servers.xrootd
    monkeypatch.setattr(servers, "xrootd", xrootd)
    restarting = Lab(lab_dir, base_port=free_base_port(), file_sizes=[64 * 1024])
    restarting.progress = None
    restarting.up()
    assert crashed.exists()
    output = (lab_dir / "logs" / "xrootd-xcache.out").read_text()
    assert "killed by signal 11, started again" in output
    assert restarting.is_running()


def test_cli_up_twice_then_down_twice_leaves_no_lab_process(lab_dir: Path) -> None:
    options = ["--dir", str(lab_dir), "--base-port", str(free_base_port()), "--file-size", "64k"]
    assert run_cli("up", *options, via="manage").returncode == 0
    pids = [int(p.read_text()) for p in (lab_dir / "run" / "pids").glob("*.pid")]
    assert len(pids) == 19

    again = run_cli("up", *options)
    assert again.returncode == 1
    assert f"lab already running in {lab_dir}" in again.stderr

    gridftp = int((lab_dir / "run" / "pids" / "gridftp.pid").read_text())
    os.kill(gridftp, signal.SIGKILL)
    broken = run_cli("status", "--dir", str(lab_dir))
    assert broken.returncode == 1
    assert f"gridftp (pid {gridftp}) stopped; run `lab down`" in broken.stderr

    stopped = run_cli("down", "--dir", str(lab_dir), via="manage")
    assert stopped.returncode == 0
    assert "stopped (18 processes)" in stopped.stdout
    assert [pid for pid in pids if runs(pid)] == []
    assert not Lab(lab_dir).running_processes()

    idle = run_cli("down", "--dir", str(lab_dir))
    assert (idle.returncode, idle.stdout) == (0, f"no lab running in {lab_dir}\n")
    status = run_cli("status", "--dir", str(lab_dir))
    assert (status.returncode, status.stderr) == (1, f"no lab running in {lab_dir}\n")


def test_up_right_after_down_works_after_a_gridftp_copy(lab_dir: Path, tmp_path: Path) -> None:
    """A GridFTP data connection leaves its port in TIME_WAIT for a minute after `down`."""
    lab = Lab(lab_dir, base_port=free_base_port(), file_sizes=[64 * 1024])
    lab.progress = None
    lab.up()
    endpoint = lab.endpoint("local-ftp")
    copied = subprocess.run(
        ["globus-url-copy", endpoint.file_url(lab_file_path(64 * 1024)), f"file://{tmp_path}/copy"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    lab.down()
    first, last = lab.layout.ftp_data
    assert _time_wait_ports() & set(range(first, last + 1)), "no data port in TIME_WAIT"

    lab.up()

    assert lab.is_running()
    again = subprocess.run(
        ["globus-url-copy", endpoint.file_url(lab_file_path(64 * 1024)), f"file://{tmp_path}/again"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr


def _time_wait_ports() -> set[int]:
    """Local ports of this host's TCP connections in TIME_WAIT."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "06":
                found.add(int(local.rsplit(":", 1)[1], 16))
    return found


def test_the_lab_imports_nothing_of_the_engine_django_celery_or_the_web_app() -> None:
    modules = sorted(
        p.stem for p in (ROOT / "workers" / "lab").glob("*.py") if not p.stem.startswith("__")
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(f'workers.lab.{{name}}')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'kombu', 'rest_framework', 'webapp') "
        "or m.startswith('workers.engine')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
