"""Third-party copies between the real lab's sites (tpc-pull, tpc-push), through `probe`:
HTTP-TPC between the token sites with a token per side, perf markers read while the copy
runs (the source or destination behind a capped relay, so that the copy lasts > 5 s), the
destination's checksum, refusals classified per side, XRootD-native TPC between the
anonymous sites, and every copy deleted after."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_16M, lab_file
from workers.engine.backends.base import OpenOptions
from workers.engine.backends.http_tpc import CopyStream, Sides, http_third_party_copy
from workers.engine.credentials import Access, AuthMethod, Credential
from workers.engine.deadline import Deadline
from workers.engine.driver import run_probe
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.params import Operation, RunParams
from workers.lab import Lab
from workers.lab.relay import RelayHost

pytestmark = pytest.mark.lab

READ = "storage.read:/fedprobe"
WRITE = "storage.read:/scratch storage.create:/scratch storage.modify:/scratch"
# 16 MiB at 2.5 MB/s: ~6.7 s, so XrdHttpTPC's markers (at the start, then every 5 s) come twice.
SLOW_MBPS = 2.5

Relay = Callable[..., tuple[RelayHost, str]]


def probe(*args: str) -> tuple[dict[str, Any], str]:
    """The run JSON of `python -m workers.engine ... --json`, and everything it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "workers.engine", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "XRD_CONNECTIONRETRY": "1"},
    )
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result, done.stdout + done.stderr


@pytest.fixture(scope="module")
def tokens(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Token files: `read` for the sources, `write` for the destinations' scratch."""
    folder = tmp_path_factory.mktemp("tpc-tokens")
    files = {}
    for name, scope in (("read", READ), ("write", WRITE)):
        files[name] = folder / name
        files[name].write_text(lab.mint_token(scope=scope))
        files[name].chmod(0o600)
    return files


def left_in_scratch(lab: Lab, run: dict[str, Any]) -> list[str]:
    """What the run left in any scratch folder, by its tag (tests in parallel copy too)."""
    tag = run["params"]["run_tag"]
    assert tag, run["params"]
    return sorted(p.name for p in lab.paths.scratch.rglob(f"fedprobe-{tag}-*"))


def scratch_url(lab: Lab, endpoint: str) -> str:
    """The endpoint's scratch folder (its site's), where copies to it land."""
    found = lab.endpoint(endpoint)
    assert found.scratch_path is not None
    return found.file_url(found.scratch_path)


def https_copy(
    operation: str, source: str, destination: str, tokens: dict[str, Path], lab: Lab, **more: str
) -> tuple[dict[str, Any], str]:
    args = [
        source,
        "--operation", operation,
        "--destination", destination,
        "--token-file", str(more.get("source_token", tokens["read"])),
        "--destination-token-file", str(more.get("destination_token", tokens["write"])),
        "--ca-dir", str(lab.ca_dir()),
    ]  # fmt: skip
    return probe(*args)


def assert_markers_during_copy(result: dict[str, Any], size: int, *, partial: bool) -> None:
    tpc = result["tpc"]
    phase = next(p for p in result["clients"][0]["phases"] if p["phase"] == "tpc")
    times = [m["t_s"] for m in tpc["markers"]]
    copied = [m["bytes"] for m in tpc["markers"]]
    assert len(times) >= 2, tpc
    assert times == sorted(times) and len(set(times)) == len(times), tpc
    assert copied == sorted(copied), tpc
    # Read as they came, not at the end: the 5 s marker well before the copy ended, with
    # part of the file copied.
    assert all(phase["start_s"] < t <= phase["end_s"] for t in times), (phase, tpc)
    if partial:
        assert any(0 < n < size for n in copied), tpc
    assert times[-1] < phase["end_s"] - 0.5, (phase, tpc)
    assert 0 < tpc["start_s"] < times[-1], tpc
    assert tpc["bytes"] == size and tpc["rate_mbps"] > 0


def test_http_tpc_pull_reads_perf_markers_while_the_copy_runs(
    lab: Lab, tokens: dict[str, Path], relay_to: Relay
) -> None:
    _, info = lab_file(lab, "local-https", FILE_16M)
    _, source = relay_to("local-https", FILE_16M, bandwidth_mbps=SLOW_MBPS)
    destination = scratch_url(lab, "near-https")
    result, printed = https_copy("tpc-pull", source, destination, tokens, lab)
    assert result["status"] == "succeeded", result["errors"]
    assert_markers_during_copy(result, info.size, partial=True)
    assert result["tpc"]["remote_connections"], result["tpc"]  # the source, as pulls say
    assert result["server_checksum"] == f"adler32:{info.adler32}"
    assert result["checksum"] == "ok"
    assert result["bytes_read"] == info.size
    assert set(result["latency_us"]) >= {"tpc", "delete"}
    assert left_in_scratch(lab, result) == []
    for token in tokens.values():
        assert token.read_text().strip() not in printed


def test_http_tpc_push_reads_perf_markers_while_the_copy_runs(
    lab: Lab, tokens: dict[str, Path], relay_to: Relay
) -> None:
    source, info = lab_file(lab, "local-https", FILE_16M)
    scratch = lab.endpoint("near-https").scratch_path
    _, destination = relay_to("near-https", str(scratch), bandwidth_mbps=SLOW_MBPS)
    result, _ = https_copy("tpc-push", source, destination, tokens, lab)
    assert result["status"] == "succeeded", result["errors"]
    # A pusher counts what it handed to its connection: the relay takes the whole 16 MiB at
    # once and paces it out after, so the 5 s marker already says all of it.
    assert_markers_during_copy(result, info.size, partial=False)
    assert result["server_checksum"] == f"adler32:{info.adler32}"
    assert left_in_scratch(lab, result) == []


@pytest.mark.parametrize("operation", ["tpc-pull", "tpc-push"])
def test_a_destination_given_a_read_token_refuses_the_copy(
    lab: Lab, tokens: dict[str, Path], operation: str
) -> None:
    """Pull: the destination refuses our COPY (401 "Unable to create"); push: the source's
    copy is refused by the destination ("Remote side failed with status code 403")."""
    source, _ = lab_file(lab, "local-https", FILE_16M)
    destination = scratch_url(lab, "near-https")
    read_only = {"destination_token": str(tokens["read"])}
    result, _ = https_copy(operation, source, destination, tokens, lab, **read_only)
    assert result["status"] == "failed"
    error = result["errors"][0]
    assert error["class"] == "tpc-destination", error
    assert ("401" if operation == "tpc-pull" else "403") in error["message"], error
    assert left_in_scratch(lab, result) == []


def test_a_source_token_that_cannot_read_is_refused_before_any_copy(
    lab: Lab, tokens: dict[str, Path]
) -> None:
    """The preflight stats the sources with the source's token: refused there, the run
    stops (auth, naming what the token lacks) before anything is written."""
    source, _ = lab_file(lab, "local-https", FILE_16M)
    destination = scratch_url(lab, "near-https")
    wrong = {"source_token": str(tokens["write"])}
    result, _ = https_copy("tpc-pull", source, destination, tokens, lab, **wrong)
    error = result["errors"][0]
    assert error["class"] == "auth" and error["client"] is None, error
    assert "storage.read:/fedprobe" in error["message"], error
    assert left_in_scratch(lab, result) == []


def copy_directly(
    lab: Lab, tokens: dict[str, Path], *, pull: bool, source_path: str, source_token: str
) -> tuple[ProbeError, CopyStream]:
    """One COPY through http_tpc, past the preflight; the 0-byte file a failed pull leaves
    at the destination is removed."""
    ca = str(lab.ca_dir())
    name = f"fedprobe-direct-{int(pull)}-c0-f0"
    sides = Sides(
        pull=pull,
        source=lab.endpoint("local-https").file_url(source_path),
        destination=scratch_url(lab, "near-https") + name,
        source_access=Access(AuthMethod.TOKEN, token_file=str(tokens[source_token]), ca_dir=ca),
        destination_access=Access(AuthMethod.TOKEN, token_file=str(tokens["write"]), ca_dir=ca),
    )
    options = OpenOptions(user="t", streams=1, deadline=Deadline.after(30))
    stream = CopyStream()
    with pytest.raises(ProbeError) as caught:
        http_third_party_copy(sides, options, time.perf_counter, stream)
    (lab.paths.scratch / "near" / name).unlink(missing_ok=True)
    return caught.value, stream


@pytest.mark.parametrize(
    "case",
    [
        # (pull, source path, source token, what the message says). The destination fetched
        # and the source answered 404 / 403: the failure line.
        (True, "/fedprobe/no-such-file", "read", "404"),
        (True, FILE_16M, "write", "403"),
        # The source itself refuses our COPY: its status.
        (False, "/fedprobe/no-such-file", "read", "400"),
        (False, FILE_16M, "write", "401"),
    ],
)
def test_a_source_that_refuses_or_lacks_the_file_is_tpc_source(
    lab: Lab, tokens: dict[str, Path], case: tuple[bool, str, str, str]
) -> None:
    pull, source_path, source_token, says = case
    error, stream = copy_directly(
        lab, tokens, pull=pull, source_path=source_path, source_token=source_token
    )
    assert error.error_class == "tpc-source", error.message
    assert says in error.message, error.message
    assert stream.outcome.startswith("failure:") == pull


@pytest.mark.parametrize("operation", ["tpc-pull", "tpc-push"])
def test_http_tpc_with_a_proxy_at_the_gsi_site_and_an_open_site_on_the_other_side(
    lab: Lab, tmp_path: Path, operation: str
) -> None:
    """The GSI site copies with our proxy as client certificate on the COPY; XrdHttpTPC 5.5.3
    cannot delegate it, so the other side is an open site (a gsi -> gsi pull is refused 403
    by the source: docs/engine.md)."""
    proxy = str(lab.write_proxy(tmp_path / "x509up"))
    if operation == "tpc-pull":
        source, info = lab_file(lab, "local-http", FILE_16M)
        args = ["--anonymous", "--destination", scratch_url(lab, "near-gsi-https")]
        args += ["--destination-proxy", proxy]
    else:
        source, info = lab_file(lab, "near-gsi-https", FILE_16M)
        args = ["--proxy", proxy, "--destination", scratch_url(lab, "local-http")]
    result, _ = probe(source, "--operation", operation, "--ca-dir", str(lab.ca_dir()), *args)
    assert result["status"] == "succeeded", result["errors"]
    assert result["server_checksum"] == f"adler32:{info.adler32}"
    assert left_in_scratch(lab, result) == []


def test_xroot_native_tpc_pull_copies_checks_and_deletes(lab: Lab) -> None:
    source, info = lab_file(lab, "local-root", FILE_16M)
    destination = scratch_url(lab, "near-root")
    result, _ = probe(source, "--operation", "tpc-pull", "--destination", destination)
    assert result["status"] == "succeeded", result["errors"]
    assert result["tpc"]["mode"] == "root"
    assert result["tpc"]["markers"] == [] and result["tpc"]["bytes"] == info.size
    assert result["server_checksum"] == f"adler32:{info.adler32}"
    assert left_in_scratch(lab, result) == []


def test_xroot_native_tpc_to_a_read_only_path_is_tpc_destination(lab: Lab) -> None:
    source, _ = lab_file(lab, "local-root", FILE_16M)
    destination = lab.endpoint("near-root").file_url("/fedprobe")
    result, _ = probe(source, "--operation", "tpc-pull", "--destination", destination)
    error = result["errors"][0]
    assert error["class"] == "tpc-destination", error
    assert "read/only" in error["message"], error


@pytest.mark.faults
@pytest.mark.parametrize(
    "case",
    [
        # (operation, source, destination, the side behind the slow relay)
        ("tpc-pull", "local-https", "near-https", "source"),
        ("tpc-push", "local-https", "near-https", "destination"),
        ("tpc-pull", "local-root", "near-root", "source"),
    ],
)
def test_a_copy_cancelled_mid_transfer_leaves_nothing_at_the_destination(
    lab: Lab, tokens: dict[str, Path], relay_to: Relay, case: tuple[str, str, str, str]
) -> None:
    """The client is killed while its copy runs, so it never deletes it; XrdHttpTPC goes on
    copying for seconds after our COPY's connection dropped and keeps what it copied, a
    native TPC's server keeps the partial file in some runs (measured: docs/engine.md). The
    run's sweep, with the destination's credential, leaves nothing, and nothing comes back."""
    operation, source_endpoint, destination_endpoint, relayed = case
    tag = f"cut-{operation}-{source_endpoint}"
    folder = lab.paths.scratch / lab.endpoint(destination_endpoint).site

    def ours() -> list[Path]:
        return list(folder.glob(f"fedprobe-{tag}-*"))

    source, info = lab_file(lab, source_endpoint, FILE_16M)
    destination = scratch_url(lab, destination_endpoint)
    if relayed == "source":
        _, source = relay_to(source_endpoint, FILE_16M, bandwidth_mbps=SLOW_MBPS)
    else:
        scratch = lab.endpoint(destination_endpoint).scratch_path
        _, destination = relay_to(destination_endpoint, str(scratch), bandwidth_mbps=SLOW_MBPS)
    http = source.startswith("https")
    params = RunParams(
        urls=(source,),
        operation=Operation(operation),
        destination=destination,
        run_tag=tag,
        ca_dir=str(lab.ca_dir()),
        credential=Credential.token(tokens["read"].read_text()) if http else None,
        destination_credential=Credential.token(tokens["write"].read_text()) if http else None,
    )
    seen: list[int] = []

    def copying() -> bool:
        """Cancel once the copy is at the destination (HTTP-TPC: with bytes in it)."""
        seen.clear()
        for path in ours():
            with contextlib.suppress(FileNotFoundError):  # the server's own cleanup
                seen.append(path.stat().st_size)
        return bool(seen) and (not http or 0 < seen[0] < info.size)

    run = run_probe(params, should_cancel=copying).to_json()
    assert run["status"] == "cancelled", run["errors"]
    assert seen, "the copy never reached the destination"
    error = run["clients"][0]["error"]
    assert error is not None and error["class"] == "cancelled", run["clients"]
    assert run["errors"][0]["message"] == "the run was cancelled", run["errors"]
    assert ours() == []
    time.sleep(1.5)  # nothing was still being written there
    assert ours() == []


@pytest.mark.faults
def test_an_http_copy_past_its_deadline_leaves_nothing_at_the_destination(
    lab: Lab, tokens: dict[str, Path], relay_to: Relay
) -> None:
    """A 6.7 s pull with a 2.5 s deadline: the client's read of the markers times out at the
    deadline and it deletes its copy while the server goes on copying into it; the run's
    sweep follows the drain. After the run nothing is left, nothing comes back."""
    _, source = relay_to("local-https", FILE_16M, bandwidth_mbps=SLOW_MBPS)
    folder = lab.paths.scratch / lab.endpoint("near-https").site
    params = RunParams(
        urls=(source,),
        operation=Operation.TPC_PULL,
        destination=scratch_url(lab, "near-https"),
        run_tag="late-copy",
        timeout_s=2.5,
        ca_dir=str(lab.ca_dir()),
        credential=Credential.token(tokens["read"].read_text()),
        destination_credential=Credential.token(tokens["write"].read_text()),
    )
    run = run_probe(params).to_json()
    assert run["status"] == "timeout", run["errors"]
    error = run["clients"][0]["error"]
    assert error is not None and error["class"] == "timeout", error
    assert "perf markers" in error["message"], error
    assert list(folder.glob("fedprobe-late-copy-*")) == []
    time.sleep(1.5)
    assert list(folder.glob("fedprobe-late-copy-*")) == []


def test_the_egress_policy_checks_the_destination_too(lab: Lab, tokens: dict[str, Path]) -> None:
    """The source (127.0.0.1) is allowed, the destination ([::1], the same server) is not:
    the preflight refuses the run before any COPY."""
    source, _ = lab_file(lab, "local-https", FILE_16M)
    destination = scratch_url(lab, "near-https").replace("127.0.0.1", "[::1]")
    params = RunParams(
        urls=(source,),
        operation=Operation.TPC_PULL,
        destination=destination,
        egress=EgressPolicy.allowing(["127.0.0.1/32"]),
        ca_dir=str(lab.ca_dir()),
        credential=Credential.token(tokens["read"].read_text()),
        destination_credential=Credential.token(tokens["write"].read_text()),
    )
    run = run_probe(params)
    assert run.run_error is not None and run.run_error[0] == "egress", run.run_error
    assert "::1" in run.run_error[1]
    assert run.clients == []


def test_lab_status_says_which_endpoints_copy(lab: Lab) -> None:
    tpc = {e.name: e.tpc for e in lab.endpoints()}
    assert tpc["local-https"] == tpc["near-gsi-https"] == tpc["local-davs"] == ("http",)
    assert tpc["near-root"] == ("root",)
    assert tpc["near-http"] == tpc["near-roots"] == tpc["xcache-root"] == tpc["local-file"] == ()


def test_a_plain_http_site_answers_no_copy(lab: Lab) -> None:
    """XrdHttp loads its TPC handler only with HTTPS: the open sites are never the copier."""
    source, _ = lab_file(lab, "local-http", FILE_16M)
    destination = scratch_url(lab, "near-http")
    result, _ = probe(source, "--operation", "tpc-pull", "--destination", destination)
    error = result["errors"][0]
    assert error["class"] == "tpc-destination", error
    assert "400" in error["message"], error


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"operation": Operation.TPC_PULL}, "destination"),
        ({"operation": Operation.TPC_PULL, "destination": "https://h:1/scratch"}, "destination"),
        ({"operation": Operation.TPC_PUSH, "destination": "root://h:1//scratch"}, "operation"),
        ({"destination": "root://h:1//scratch"}, "destination"),
    ],
)
def test_a_copy_needs_a_destination_of_its_protocol(changes: dict[str, Any], field: str) -> None:
    params = RunParams(urls=("root://h:1//fedprobe/f",), **changes)
    with pytest.raises(InvalidParams) as caught:
        params.validate()
    assert caught.value.field == field


def test_the_other_sides_token_never_goes_over_plain_http(tmp_path: Path) -> None:
    """TransferHeaderAuthorization follows the token rule: a COPY sent to an http:// side
    would carry the other side's token in the clear, so none is sent at all."""
    token = tmp_path / "token"
    token.write_text("secret-token")
    token.chmod(0o600)
    sides = Sides(
        pull=True,
        source="https://source.example:8443/data/f",
        destination="http://destination.example:8000/scratch/f",
        source_access=Access(AuthMethod.TOKEN, token_file=str(token)),
        destination_access=Access(),
    )
    with pytest.raises(ProbeError) as refused:
        sides.headers()
    assert refused.value.error_class == ErrorClass.AUTH
    assert "secret-token" not in refused.value.message
    over_tls = replace(sides, destination="https://destination.example:8443/scratch/f")
    assert over_tls.headers()["TransferHeaderAuthorization"] == "Bearer secret-token"
