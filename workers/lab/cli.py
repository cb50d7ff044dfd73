"""`lab up|down|status|token|proxy`: the command line of the lab, shared by
`python -m workers.lab` and `python manage.py lab` (which only supplies the default dir and
its output streams)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from workers.lab.endpoints import LabEndpoint
from workers.lab.errors import LabError
from workers.lab.files import TextSink, parse_size, size_label
from workers.lab.issuer import DEFAULT_SCOPE, LAB_AUDIENCE
from workers.lab.lab import Lab
from workers.lab.ports import BLOCK_SIZE, FIRST_PORT
from workers.lab.profiles import PROFILES

DEFAULT_DIR = Path("/tmp/fedprobe-lab")
DEFAULT_BASE_PORT = 21000
EXIT_OK, EXIT_FAILED = 0, 1


LAB_ACTIONS = ("up", "down", "status", "token", "proxy")
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def add_lab_arguments(
    parser: argparse.ArgumentParser, default_dir: Path, actions: tuple[str, ...] = LAB_ACTIONS
) -> None:
    parser.add_argument("action", choices=actions)
    parser.add_argument(
        "--dir", type=Path, default=default_dir, help=f"lab state dir (default {default_dir})"
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="test",
        help="; ".join(f"{p.name}: {p.description}" for p in PROFILES.values()),
    )
    parser.add_argument(
        "--base-port",
        type=base_port_option,
        default=DEFAULT_BASE_PORT,
        help=f"first of the {BLOCK_SIZE} ports the lab uses (default {DEFAULT_BASE_PORT})",
    )
    parser.add_argument(
        "--file-size",
        dest="file_sizes",
        type=size_option,
        action="append",
        metavar="SIZE",
        help="test file size like 4k, 16M, 1G; repeat for several (default 1M, 16M, 256M)",
    )
    parser.add_argument("--json", action="store_true", help="print the endpoints as JSON")
    credentials = parser.add_argument_group("token and proxy")
    credentials.add_argument(
        "--scope", default=DEFAULT_SCOPE, help=f"token scope (default {DEFAULT_SCOPE})"
    )
    credentials.add_argument(
        "--audience", default=LAB_AUDIENCE, help=f"token audience (default {LAB_AUDIENCE})"
    )
    credentials.add_argument(
        "--lifetime",
        type=duration_option,
        default=3600,
        metavar="DURATION",
        help="token lifetime like 30s, 20m, 1h (default 1h)",
    )
    credentials.add_argument(
        "--expired", action="store_true", help="a token or proxy that ended an hour ago"
    )
    credentials.add_argument(
        "--rogue", action="store_true", help="a proxy from a CA the lab does not trust"
    )


def base_port_option(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not FIRST_PORT <= port <= 65536 - BLOCK_SIZE:
        raise argparse.ArgumentTypeError(
            f"{port} out of range: the lab needs {BLOCK_SIZE} ports from it, "
            f"between {FIRST_PORT} and 65535"
        )
    return port


def size_option(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_option(text: str) -> int:
    match = _DURATION.match(text)
    if not match or int(match[1]) < 1:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: give seconds or a number with s, m, h, d (20m)"
        )
    return int(match[1]) * _SECONDS[match[2]]


def run_lab_command(options: Mapping[str, object], out: TextSink, err: TextSink) -> int:
    """Run one parsed `lab` command; returns the exit status."""
    action = str(options["action"])
    try:
        if action == "up":
            return _up(_lab(options, progress=err), bool(options["json"]), out, err)
        lab = Lab(Path(str(options["dir"])))
        if action == "down":
            return _down(lab, out)
        if action == "token":
            return _token(lab, options, out)
        if action == "proxy":
            path = lab.write_proxy(expired=bool(options["expired"]), rogue=bool(options["rogue"]))
            out.write(f"{path}\n")
            return EXIT_OK
        return _status(lab, bool(options["json"]), out, err)
    except LabError as exc:
        err.write(f"lab {action}: {exc}\n")
        return EXIT_FAILED


def _lab(options: Mapping[str, object], progress: TextSink) -> Lab:
    sizes = options.get("file_sizes")
    lab = Lab(
        Path(str(options["dir"])),
        profile=str(options["profile"]),
        base_port=int(str(options["base_port"])),
        file_sizes=list(sizes) if isinstance(sizes, list) else None,
    )
    lab.progress = progress
    return lab


def _up(lab: Lab, as_json: bool, out: TextSink, err: TextSink) -> int:
    started = time.monotonic()
    lab.up()
    took = time.monotonic() - started
    err.write(f"lab up in {lab.state_dir} after {took:.1f} s\n")
    return _status(lab, as_json, out, err)


def _token(lab: Lab, options: Mapping[str, object], out: TextSink) -> int:
    token = lab.mint_token(
        scope=str(options["scope"]),
        audience=str(options["audience"]),
        lifetime_s=int(str(options["lifetime"])),
        expired=bool(options["expired"]),
    )
    out.write(token + "\n")
    return EXIT_OK


def _down(lab: Lab, out: TextSink) -> int:
    alive = lab.running_processes()
    if not alive and not lab.paths.state.exists():
        out.write(f"no lab running in {lab.state_dir}\n")
        return EXIT_OK
    lab.down()
    out.write(f"lab in {lab.state_dir} stopped ({len(alive)} processes)\n")
    return EXIT_OK


def _status(lab: Lab, as_json: bool, out: TextSink, err: TextSink) -> int:
    if not lab.is_running():
        dead = lab.dead_processes()
        if dead and lab.running_processes():
            gone = ", ".join(f"{name} (pid {pid})" for name, pid in sorted(dead.items()))
            err.write(f"lab in {lab.state_dir} is broken: {gone} stopped; run `lab down`\n")
        else:
            err.write(f"no lab running in {lab.state_dir}\n")
        return EXIT_FAILED
    endpoints = lab.endpoints()
    if as_json:
        out.write(json.dumps([e.to_json() for e in endpoints], indent=2) + "\n")
    else:
        out.write(_status_text(lab, endpoints))
    return EXIT_OK


def _status_text(lab: Lab, endpoints: Sequence[LabEndpoint]) -> str:
    state = lab.state()
    first = int(str(state["base_port"]))
    last = first + BLOCK_SIZE - 1
    lines = [
        f"lab in {lab.state_dir}: profile {state['profile']}, ports {first}-{last}, "
        f"up since {state['started_at']}",
        f"CA dir (X509_CERT_DIR): {state['ca_dir']}",
        f"token issuer: {state['issuer']} (audience {LAB_AUDIENCE})",
        f"tokens (BEARER_TOKEN_FILE): read {lab.token_file('read')}, "
        f"write {lab.token_file('write')}",
        "scratch (writable): /scratch/SITE/ at every door of a site; endpoints listen on "
        "127.0.0.1 and ::1 (local-ftp: 127.0.0.1)",
        "",
        *_table(
            ("endpoint", "site", "role", "RTT", "link", "auth", "URL"),
            [
                (e.name, e.site, e.role, f"{e.rtt_ms:g} ms", _link_label(e), _auth_label(e), e.url)
                for e in endpoints
            ],
        ),
        "",
        *_table(("file", "size", "adler32", "served by"), _file_rows(endpoints)),
    ]
    return "\n".join(lines) + "\n"


def _link_label(endpoint: LabEndpoint) -> str:
    """The site link's cap, shared by all the site's endpoints ("-": unlimited)."""
    return "-" if endpoint.bandwidth_mbps is None else f"{endpoint.bandwidth_mbps:g} MB/s"


def _auth_label(endpoint: LabEndpoint) -> str:
    return endpoint.auth + (", TLS" if endpoint.tls else "")


def _file_rows(endpoints: Sequence[LabEndpoint]) -> list[tuple[str, ...]]:
    serving: dict[tuple[str, int, str], list[str]] = {}
    for endpoint in endpoints:
        for f in endpoint.files:
            serving.setdefault((f.path, f.size, f.adler32), []).append(endpoint.name)
    return [
        (
            path,
            size_label(size),
            adler32,
            "all data endpoints" if len(names) > 3 else ", ".join(names),
        )
        for (path, size, adler32), names in serving.items()
    ]


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.lab",
        description="Start, stop or show the lab federation (real servers on loopback).",
    )
    default_dir = Path(os.environ.get("FEDPROBE_LAB_DIR", str(DEFAULT_DIR)))
    add_lab_arguments(parser, default_dir)
    options = vars(parser.parse_args(argv))
    return run_lab_command(options, out=sys.stdout, err=sys.stderr)
