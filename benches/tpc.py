"""Third-party copies: the engine's copy rate vs the bare tools, between two lab sites.

    .venv/bin/python benches/tpc.py [--lab-dir DIR] [--trials 5] [--size 256M]

The same file copied from the local site to the near site's scratch folder, pulled by the near
site, each tool in turn, the copy deleted after each:
- HTTP-TPC over https with a token per side (local-https -> near-https): the engine
  (tpc-pull) against a bare httpx COPY (the engine's library, in this process) and
  `curl -X COPY -H @FILE` (the tokens from a 0600 file: never argv;
  davix-cp takes headers only in argv, so it is left out here);
- HTTP-TPC into the GSI site with our proxy (local-http -> near-gsi-https; the proxy is
  a file path in argv, not the secret): the engine against `davix-cp --copy-mode pull`
  and `curl -X COPY --cert`;
- XRootD-native TPC (local-root -> near-root): the engine (the bindings' CopyProcess,
  thirdparty="only") against `xrdcp --tpc only`.
The engine's figure is its copy phase (the COPY until its last line; the native copy job),
the tools' is their wall time (a process start included): the rate is the file's size
over it.
"""

from __future__ import annotations

import argparse
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import running_lab

from workers.engine import RunParams, run_probe
from workers.engine.credentials import Credential
from workers.engine.params import Operation
from workers.engine.units import parse_size, size_text
from workers.lab import Lab
from workers.lab.ports import free_base_port

READ = "storage.read:/fedprobe"
WRITE = "storage.read:/scratch storage.create:/scratch storage.modify:/scratch"


def engine_copy_s(lab: Lab, kind: str, source: str, destination: str, proxy: Path) -> float:
    source_token = destination_token = destination_proxy = None
    if kind == "https":
        source_token = Credential.token(lab.mint_token(scope=READ))
        destination_token = Credential.token(lab.mint_token(scope=WRITE))
    if kind == "gsi":
        destination_proxy = Credential.x509_proxy(proxy.read_text())
    params = RunParams(
        urls=(source,),
        operation=Operation.TPC_PULL,
        destination=destination,
        run_tag="bench",
        ca_dir=str(lab.ca_dir()),
        credential=source_token,
        destination_credential=destination_token or destination_proxy,
    )
    run = run_probe(params)
    (client,) = run.clients
    assert client.ok and client.tpc is not None, client.error
    return client.tpc.copy_s


def bare_httpx_s(lab: Lab, source: str, target: str, copy: Path) -> float:
    """The same COPY with a bare httpx client (the engine's library): connect, send, read the
    body to its end, check the last line."""
    context = ssl.create_default_context(capath=str(lab.ca_dir()))
    headers = {
        "Source": source,
        "Authorization": f"Bearer {lab.mint_token(scope=WRITE)}",
        "TransferHeaderAuthorization": f"Bearer {lab.mint_token(scope=READ)}",
    }
    with httpx.Client(verify=context, timeout=60) as client:
        started = time.perf_counter()
        with client.stream("COPY", target, headers=headers) as response:
            last = list(response.iter_lines())[-1]
        elapsed = time.perf_counter() - started
    assert last.startswith("success"), last
    copy.unlink()
    return elapsed


def tool_s(argv: list[str], copy: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0 and copy.exists(), done.stderr.decode()[-500:]
    assert b"failure" not in done.stdout, done.stdout[-300:]
    copy.unlink()
    return elapsed


def curl_copy(lab: Lab, source: str, target: str, *credential: str) -> list[str]:
    capath = ["--capath", str(lab.ca_dir())]
    return ["curl", "-sS", "-X", "COPY", "-H", f"Source: {source}", *capath, *credential, target]


def header_file(lab: Lab, folder: Path) -> Path:
    """The two tokens of a pull, as curl reads headers from a file (mode 0600)."""
    path = folder / "headers"
    path.touch(mode=0o600)
    path.write_text(
        f"Authorization: Bearer {lab.mint_token(scope=WRITE)}\n"
        f"TransferHeaderAuthorization: Bearer {lab.mint_token(scope=READ)}\n"
    )
    return path


def bare_tools(lab: Lab, kind: str, source: str, target: str, folder: Path) -> dict[str, list[str]]:
    """The bare references of one kind of copy, by name: their argv."""
    proxy = str(folder / "x509up")
    if kind == "gsi":
        davix = ["davix-cp", "--capath", str(lab.ca_dir()), "--cert", proxy, "--key", proxy]
        return {
            "davix-cp --copy-mode pull, gsi": [*davix, "--copy-mode", "pull", source, target],
            "curl -X COPY, gsi": curl_copy(lab, source, target, "--cert", proxy, "--key", proxy),
        }
    if kind == "https":
        headers = f"@{header_file(lab, folder)}"
        return {"curl -X COPY, https + tokens": curl_copy(lab, source, target, "-H", headers)}
    return {"xrdcp --tpc only, root": ["xrdcp", "--nopbar", "--tpc", "only", source, target]}


PAIRS = {
    "https": ("local-https", "near-https"),
    "gsi": ("local-http", "near-gsi-https"),
    "root": ("local-root", "near-root"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default=None)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--size", default="256M")
    args = parser.parse_args()
    size = parse_size(args.size)
    path = f"/fedprobe/file-{size_text(size)}"
    rows: list[tuple[str, float]] = []
    with (
        running_lab(args.lab_dir, "test", [size], base_port=free_base_port()) as lab,
        tempfile.TemporaryDirectory() as folder,
    ):
        copy = lab.paths.scratch / "near" / "fedprobe-bench-tool"
        proxy = lab.write_proxy(Path(folder) / "x509up")
        for kind, (source_name, destination_name) in PAIRS.items():
            source = lab.endpoint(source_name).file_url(path)
            endpoint = lab.endpoint(destination_name)
            destination = endpoint.file_url(str(endpoint.scratch_path))
            target = f"{destination.rstrip('/')}/{copy.name}"
            tools = bare_tools(lab, kind, source, target, Path(folder))
            # Trials interleaved (engine, then each tool, in turn): a slower minute of a
            # shared machine falls on all of them alike.
            times: dict[str, list[float]] = {f"engine, {kind}": [], **{name: [] for name in tools}}
            for _ in range(args.trials):
                times[f"engine, {kind}"].append(
                    engine_copy_s(lab, kind, source, destination, proxy)
                )
                for name, argv in tools.items():
                    times[name].append(tool_s(argv, copy))
                if kind == "https":
                    times.setdefault("bare httpx COPY, https + tokens", []).append(
                        bare_httpx_s(lab, source, target, copy)
                    )
            rows += [(name, statistics.median(seconds)) for name, seconds in times.items()]
            print(kind, {k: [round(x, 3) for x in v] for k, v in times.items()}, file=sys.stderr)
    mib = size / 2**20
    print(f"| pull of {mib:.0f} MiB, local -> near | seconds (median of {args.trials}) | MB/s |")
    print("|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} | {size / seconds / 1e6:,.0f} |")


if __name__ == "__main__":
    os.environ.setdefault("XRD_CONNECTIONRETRY", "1")
    main()
