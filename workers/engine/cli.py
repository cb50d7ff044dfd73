"""The `probe` command: one run from this host, shown as a table or as the run JSON.

Shared by `python -m workers.engine` and `python manage.py probe`. Exit status: 0 when
the run succeeded, 1 when it ended otherwise (partial, failed, timeout, cancelled),
2 for bad input (nothing was started). With `--nagios` it is a monitoring plugin instead:
one status line and exit 0/1/2/3 (workers/engine/nagios.py, docs/monitoring-probes.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO
from urllib.parse import urlsplit

from workers.engine.cleanup import cleanup_written
from workers.engine.credentials import (
    GRID_CA_DIR,
    Credential,
    discover_credential,
    read_secret_file,
    resolve_ca_dir,
)
from workers.engine.driver import Progress, run_probe, run_probes
from workers.engine.errors import InvalidParams, ProbeError
from workers.engine.nagios import Verdict, judge_run, parse_probe_thresholds, unknown
from workers.engine.params import (
    METADATA_OPERATIONS,
    AddressFamily,
    Method,
    Operation,
    Pattern,
    ReplayTiming,
    RunParams,
)
from workers.engine.plugin import BadThreshold, State, Thresholds
from workers.engine.protocols import PROTOCOLS, Protocol
from workers.engine.results import RunJson, RunResult, RunStatus
from workers.engine.units import format_size, parse_size
from workers.engine.urls import check_credential_hosts

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _schemes(protocol: Protocol) -> str:
    return " ".join(f"{scheme.name}://" for scheme in protocol.schemes)


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe options of docs/engine.md (shared with the Django management command)."""
    d = RunParams(urls=("",))
    parser.add_argument(
        "urls",
        nargs="+",
        metavar="URL",
        help=f"file to read ({', '.join(f'{p.name}: {_schemes(p)}' for p in PROTOCOLS)}); "
        "several URLs form the collection clients read with --files; "
        "for a write or a list, directories",
    )
    parser.add_argument(
        "--operation",
        choices=[str(o) for o in Operation],
        default=str(d.operation),
        help="read (default); write: each client writes --files files of --file-size bytes "
        "(in --read-size requests) into the URLs, which are directories, checks the server's "
        "checksum and deletes them; stat, open (open and close), list: --ops operations per "
        "client at --rate; tpc-pull, tpc-push: third-party copies to --destination; "
        "replay: see --trace",
    )
    parser.add_argument(
        "--file-size",
        type=_size,
        default=d.file_size,
        help="with --operation write: bytes of each file written: 16M (default), 1G",
    )
    parser.add_argument(
        "--ops",
        type=int,
        default=d.ops,
        help="with --operation stat, open or list: operations per client (default 1000)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=d.rate,
        help="with --operation stat, open or list: operations per second per client "
        "(default 0: as fast as possible)",
    )
    parser.add_argument(
        "--run-tag",
        default=None,
        metavar="TAG",
        help="with --operation write: names the files written (fedprobe-TAG-cN-fK; "
        "default: a random tag)",
    )
    parser.add_argument("--method", choices=[str(m) for m in Method], default=str(d.method))
    parser.add_argument("--pattern", choices=[str(p) for p in Pattern], default=str(d.pattern))
    parser.add_argument(
        "--read-size",
        type=_size,
        default=d.read_size,
        help="bytes per read: 4096, 4k, 1M (default 4k)",
    )
    parser.add_argument(
        "--fraction",
        type=float,
        default=d.fraction,
        help="fraction of the file to read, in (0, 1] (default 0.1)",
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=d.clients,
        help="simultaneous clients, each a process with its own connection",
    )
    parser.add_argument("--files", type=int, default=d.files, help="files each client reads")
    parser.add_argument(
        "--depth", type=int, default=d.depth, help="requests outstanding with --pattern async"
    )
    parser.add_argument(
        "--vector-size",
        type=int,
        default=d.vector_size,
        help="chunks per vectored read with --pattern vector",
    )
    parser.add_argument(
        "--skip",
        type=int,
        default=d.skip,
        help="blocks skipped after each block read with --pattern skip",
    )
    parser.add_argument(
        "--readahead",
        type=_size,
        default=d.readahead,
        help="client-side read-ahead window in bytes (0 = unbuffered)",
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=d.streams,
        help="parallel TCP substreams (XRootD) or copy streams",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="deadline in seconds (default: derived from the planned bytes and round trips)",
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the random offsets")
    parser.add_argument(
        "--adler32",
        default=None,
        help="expected adler32 of the file, checked where the reads allow",
    )
    parser.add_argument(
        "--scratch",
        default=None,
        help="directory for copies (copy and stage methods; default: $TMPDIR)",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="bearer token to present (ztn on root(s)://, Authorization on https/davs)",
    )
    parser.add_argument(
        "--proxy",
        default=None,
        metavar="PATH",
        help="X.509 proxy to present (gsi on root://, client certificate on https/davs)",
    )
    parser.add_argument(
        "--destination",
        default=None,
        metavar="URL",
        help="tpc-pull, tpc-push: the directory copies land in (as fedprobe-TAG-cC-fK, "
        "deleted after)",
    )
    parser.add_argument(
        "--destination-token-file",
        default=None,
        metavar="PATH",
        help="bearer token the destination is given (scoped to write there; the source's "
        "credential is --token-file or --proxy)",
    )
    parser.add_argument(
        "--destination-proxy",
        default=None,
        metavar="PATH",
        help="X.509 proxy presented to the destination (HTTP-TPC push or pull over https)",
    )
    parser.add_argument(
        "--credential-host",
        action="append",
        default=None,
        metavar="HOST",
        help="a host the credential may also go to when the endpoint redirects there (a name, "
        "an address or a .domain suffix; repeat for several; default: the endpoint only)",
    )
    parser.add_argument(
        "--anonymous",
        action="store_true",
        help="present no credential, not even one found by discovery",
    )
    parser.add_argument(
        "--ca-dir",
        default=None,
        metavar="DIR",
        help="CA folder servers are verified against (default: $FEDPROBE_CA_DIR, "
        f"$X509_CERT_DIR, {GRID_CA_DIR} if it exists, else the system store)",
    )
    parser.add_argument(
        "--address-family",
        choices=[str(f) for f in AddressFamily],
        default=str(d.address_family),
        help="connect over IPv4 (4) or IPv6 (6) only, as the client library likes (any), or "
        "one run per address of the endpoint's name (each: one table, or with --json a list "
        "of run JSONs); the run says which family and address it used",
    )
    parser.add_argument(
        "--trace",
        default=None,
        metavar="CSV",
        help="replay this XRootD client recorder CSV (implies operation replay); the URLs "
        "are the trace's files, in the order it first opens them",
    )
    parser.add_argument(
        "--replay-timing",
        choices=[str(t) for t in ReplayTiming],
        default=str(d.replay_timing),
        help="asap: each operation as soon as the one before ends; recorded: at its recorded "
        "time from the start (default asap)",
    )
    parser.add_argument("--json", action="store_true", help="print the run JSON")
    parser.add_argument(
        "--nagios",
        action="store_true",
        help="behave as a monitoring plugin (Nagios, Icinga, Checkmk, ETF): one status line "
        "with performance data, exit 0/1/2/3 for OK/WARNING/CRITICAL/UNKNOWN",
    )
    for flag in ("warning", "critical"):
        parser.add_argument(
            f"-{flag[0]}",
            f"--{flag}",
            default=None,
            metavar="EXPR",
            help=f"with --nagios: {flag.upper()} when a metric is outside its range: "
            "NAME=RANGE[,NAME=RANGE...] with NAME throughput (MB/s), open_time (s) or "
            "availability (%%); a bare RANGE is throughput's; RANGE as the plugin guidelines "
            "write it (10, 10:, ~:10, 10:20, @10:20)",
        )


def params_from_options(options: dict[str, object]) -> RunParams:
    """Build RunParams from parsed options; raise InvalidParams naming the bad one."""

    def get(name: str) -> object:
        return options[name]

    urls = get("urls")
    assert isinstance(urls, list | tuple)
    d = RunParams(urls=("",))
    params = RunParams(
        urls=tuple(str(u) for u in urls),
        method=Method(str(get("method"))),
        pattern=Pattern(str(get("pattern"))),
        read_size=_int(get("read_size")),
        fraction=float(str(get("fraction"))),
        clients=_int(get("clients")),
        files=_int(get("files")),
        depth=_int(get("depth")),
        vector_size=_int(get("vector_size")),
        skip=_int(get("skip")),
        readahead=_int(get("readahead")),
        streams=_int(get("streams")),
        file_size=_int(options.get("file_size", d.file_size)),
        ops=_int(options.get("ops", d.ops)),
        rate=float(str(options.get("rate", d.rate))),
        run_tag=_text(options.get("run_tag")),
        timeout_s=None if get("timeout") is None else float(str(get("timeout"))),
        seed=_int(get("seed")),
        adler32=_checksums(urls, get("adler32")),
        scratch_dir=None if get("scratch") is None else str(get("scratch")),
        credential=_credential(options, str(urls[0])),
        credential_hosts=check_credential_hosts(
            _texts(options.get("credential_host")), field="credential_host"
        ),
        ca_dir=resolve_ca_dir(_text(options.get("ca_dir"))),
        address_family=AddressFamily(str(options.get("address_family") or AddressFamily.ANY)),
        destination=_text(options.get("destination")),
        destination_credential=_destination_credential(options),
        **_operation_options(options),
    )
    params.validate()
    return params


def _operation_options(options: dict[str, object]) -> dict[str, Any]:
    """--operation, or a replay when --trace is given."""
    operation = Operation(str(options.get("operation") or Operation.READ))
    replay = _replay_options(options)
    if replay and operation not in (Operation.READ, Operation.REPLAY):
        raise InvalidParams("trace", f"a trace is replayed, not with --operation {operation}")
    return {"operation": operation, **replay}


def _replay_options(options: dict[str, object]) -> dict[str, Any]:
    """--trace makes a replay, paced by --replay-timing."""
    trace = _text(options.get("trace"))
    if trace is None:
        return {}
    timing = ReplayTiming(str(options.get("replay_timing", ReplayTiming.ASAP)))
    return {"operation": Operation.REPLAY, "trace": trace, "replay_timing": timing}


def _credential(options: dict[str, object], url: str) -> Credential | None:
    """--token-file or --proxy; without them (and without --anonymous), discovery."""
    token_file, proxy = _text(options.get("token_file")), _text(options.get("proxy"))
    if token_file and proxy:
        raise InvalidParams("credential", "give --token-file or --proxy, not both")
    if token_file:
        return Credential.token(read_secret_file(token_file, "token_file"))
    if proxy:
        return Credential.x509_proxy(read_secret_file(proxy, "proxy"))
    if options.get("anonymous"):
        return None
    return discover_credential(urlsplit(url).scheme)


def _destination_credential(options: dict[str, object]) -> Credential | None:
    """--destination-token-file or --destination-proxy (read from files: never argv)."""
    token_file = _text(options.get("destination_token_file"))
    proxy = _text(options.get("destination_proxy"))
    if token_file and proxy:
        raise InvalidParams(
            "destination_credential",
            "give --destination-token-file or --destination-proxy, not both",
        )
    if token_file:
        return Credential.token(read_secret_file(token_file, "destination_token_file"))
    if proxy:
        return Credential.x509_proxy(read_secret_file(proxy, "destination_proxy"))
    return None


def _texts(value: object) -> list[str]:
    """A repeated option's values (None when it was not given)."""
    assert value is None or isinstance(value, list | tuple)
    return [str(item) for item in value or ()]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _checksums(urls: Sequence[object], adler32: object) -> tuple[tuple[str, str], ...]:
    """--adler32 names the checksum of every URL given (normally one file)."""
    if adler32 is None:
        return ()
    if isinstance(adler32, dict):
        return tuple((str(u), str(a)) for u, a in adler32.items())
    return tuple((str(url), str(adler32)) for url in urls)


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def execute(params: RunParams, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Run, show progress on `err`, print the result on `out`; return the exit status."""
    bar = ProgressBar(err)
    try:
        results = run_probes(params, on_progress=bar.update)
    except InvalidParams as exc:
        bar.clear()
        err.write(f"error: {exc.field}: {exc.message}\n")
        return EXIT_BAD_INPUT
    bar.clear()
    if as_json and params.address_family == AddressFamily.EACH:
        out.write(json.dumps([r.to_json() for r in results], indent=2) + "\n")
    elif as_json:
        out.write(json.dumps(results[0].to_json(), indent=2) + "\n")
    else:
        out.write("\n".join(summary_table(result) for result in results))
    succeeded = all(result.status == RunStatus.SUCCEEDED for result in results)
    return EXIT_OK if succeeded else EXIT_RUN_FAILED


class ProgressBar:
    """A one-line bar on a terminal; a line every few seconds when output is not a terminal."""

    WIDTH = 30
    PLAIN_EVERY_S = 5.0

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.shown = False
        self.last_plain = time.monotonic()

    def update(self, progress: Progress) -> None:
        done = progress.bytes_done / progress.bytes_planned if progress.bytes_planned else 0.0
        done = min(done, 1.0)
        amount = format_size if not progress.counts_ops else _operations
        text = (
            f"{done:6.1%} {amount(progress.bytes_done)} of "
            f"{amount(progress.bytes_planned)}, clients done {progress.clients_done}/"
            f"{progress.clients}, {progress.elapsed_s:.1f} s (deadline {progress.deadline_s:.0f} s)"
        )
        if self.tty:
            filled = int(done * self.WIDTH)
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {text}\x1b[K")
            self.stream.flush()
            self.shown = True
        elif time.monotonic() - self.last_plain >= self.PLAIN_EVERY_S:
            self.last_plain = time.monotonic()
            self.stream.write(f"progress: {text}\n")
            self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _operations(count: int) -> str:
    return f"{count:,} ops"


def summary_table(result: RunResult) -> str:
    """A readable summary of a run: what was asked, the headline figures, each client."""
    run = result.to_json()
    p = result.params
    lat = run["op_latency_us"]
    assert isinstance(lat, dict)
    bytes_read = int(str(run["bytes_read"]))
    bytes_wire = int(str(run["bytes_wire"]))
    ratio = f"{bytes_wire / bytes_read:.2f}x" if bytes_read else "-"
    rows = [
        ("url", ", ".join(p.urls)),
        ("run", what_was_done(p)),
        ("status", str(run["status"])),
        ("wall", _seconds(run["wall_s"]) if result.clients else "-"),
        ("open (p50)", _seconds(run["open_s"])),
        ("first byte (p50)", _seconds(run["ttfb_s"])),
        ("throughput", _throughput(run) if bytes_read or run.get("bytes_written") else "-"),
        (
            "ops",
            f"{run['ops']}  latency us p50 {lat['p50']}  p90 {lat['p90']}  "
            f"p99 {lat['p99']}  max {lat['max']}"
            if run["ops"]
            else "0",
        ),
        (
            "bytes",
            f"requested {format_size(int(str(run['bytes_requested'])))}, "
            f"read {format_size(bytes_read)}, over the wire {format_size(bytes_wire)} "
            f"({ratio} of read)",
        ),
        ("cpu", _seconds(run["cpu_s"]) if result.clients else "-"),
        ("served by", ", ".join(run["served_by"]) or "-"),
        ("server", str(run["server_version"] or "-")),
        ("client", str(run.get("client_version") or "-")),
        ("auth, tls", f"{run['auth']}, {_tls_text(run['tls'])}"),
        ("address", _address_text(run)),
        ("checksum", str(run["checksum"] or "not checked")),
        *_beyond_reads(run),
    ]
    lines = [f"{name:<17} {value}" for name, value in rows]
    lines.append("")
    lines.append(
        f"{'client':>6} {'status':<12} {'open_s':>9} {'ttfb_s':>9} {'read_s':>9} "
        f"{'copy_s':>9} {'wall_s':>9} {'MB/s':>9} {'ops':>8}  served by / error"
    )
    for c in result.clients:
        status = "ok" if c.error is None else str(c.error.error_class)
        note = ", ".join(c.served_by) if c.error is None else c.error.message
        figures = (
            _cell(c.open_s if c.ops or c.copy_s else None, ".4f"),
            _cell(c.ttfb_s, ".4f"),
            _cell(c.read_s if c.ops else None, ".4f"),
            _cell(c.copy_s or None, ".4f"),
            _cell(c.wall_s, ".4f"),
            _cell(c.throughput_mbps if c.bytes_read or c.bytes_written else None, ".2f"),
        )
        lines.append(f"{c.client:>6} {status:<12} {' '.join(figures)} {c.ops:>8}  {note}")
    for error in run["errors"]:
        if error["client"] is None:
            lines.append(f"run error: {error['class']}: {error['message']}")
    return "\n".join(lines) + "\n"


def what_was_done(p: RunParams) -> str:
    """The run's operation and what shaped it, in a line."""
    who = f"clients {p.clients}"
    if p.operation == Operation.WRITE:
        return (
            f"write {p.files} file(s) of {format_size(p.file_size)} per client in "
            f"{format_size(p.read_size)} requests, then checksum and delete (tag {p.run_tag}), "
            f"{who}"
        )
    if p.operation in METADATA_OPERATIONS:
        pace = f"at {p.rate:g}/s per client" if p.rate else "as fast as possible"
        return f"{p.operation} x {p.ops} per client over {len(p.urls)} URL(s) {pace}, {who}"
    return (
        f"method {p.method}, pattern {p.pattern}, read {format_size(p.read_size)}, "
        f"fraction {p.fraction:g}, {who}, files {p.files}"
    )


def _beyond_reads(run: RunJson) -> list[tuple[str, str]]:
    rows = []
    if run.get("bytes_written"):
        rows.append(("written", format_size(int(run.get("bytes_written") or 0))))
    if run.get("server_checksum"):
        rows.append(("server checksum", str(run.get("server_checksum"))))
    if run.get("ops_per_s") is not None:
        rows.append(("ops/s", f"{run.get('ops_per_s')}"))
    return rows


def _address_text(run: RunJson) -> str:
    """ "127.0.0.1 (IPv4)"; "- (IPv6)" for a pinned run that connected nowhere."""
    family = {"4": " (IPv4)", "6": " (IPv6)"}.get(run.get("address_family") or "", "")
    return f"{run.get('address') or '-'}{family}"


def _throughput(run: RunJson) -> str:
    per_client = run["client_throughput_mbps"]
    shown = "-" if per_client is None else f"{per_client:.2f} MB/s"
    return f"{run['throughput_mbps']:.2f} MB/s aggregate, {shown} per client (p50)"


def _cell(value: float | None, spec: str) -> str:
    """A figure of the per-client table, or "-" where nothing was measured."""
    return f"{'-' if value is None else format(value, spec):>9}"


def _tls_text(tls: object) -> str:
    if not isinstance(tls, dict):
        return "no TLS"
    named = [str(tls[k]) for k in ("version", "cipher") if tls.get(k)]
    return " ".join(named) if named else "TLS (version not reported)"


def _seconds(value: object) -> str:
    if value is None:
        return "-"
    seconds = float(str(value))
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


class _Parser(argparse.ArgumentParser):
    """An option error is one line naming the option, not the whole usage before it; as a
    monitoring plugin, an UNKNOWN status line (the tester's fault, not the service's)."""

    nagios = False

    def error(self, message: str) -> NoReturn:
        if self.nagios:
            sys.stdout.write(unknown(f"{message} ({self.prog} -h for help)").line + "\n")
            self.exit(State.UNKNOWN)
        self.exit(EXIT_BAD_INPUT, f"error: {message} ({self.prog} -h for help)\n")


def cleanup_main(argv: Sequence[str]) -> int:
    """`python -m workers.engine cleanup --run-tag TAG DIR_URL...`: delete what a write run
    left (fedprobe-TAG-* in those directories, nothing else), print each URL deleted."""
    parser = _Parser(
        prog="python -m workers.engine cleanup",
        description="Delete the files a write run left behind (fedprobe-TAG-*) in directories.",
    )
    parser.add_argument("urls", nargs="+", metavar="URL", help="directory the run wrote in")
    parser.add_argument("--run-tag", required=True, metavar="TAG", help="the run's tag")
    parser.add_argument("--token-file", default=None, metavar="PATH")
    parser.add_argument("--proxy", default=None, metavar="PATH")
    parser.add_argument("--anonymous", action="store_true")
    parser.add_argument("--ca-dir", default=None, metavar="DIR")
    options = vars(parser.parse_args(list(argv)))
    try:
        deleted = cleanup_written(
            run_tag=str(options["run_tag"]),
            urls=[str(url) for url in options["urls"]],
            credential=_credential(options, str(options["urls"][0])),
            ca_dir=resolve_ca_dir(_text(options.get("ca_dir"))),
        )
    except InvalidParams as exc:
        sys.stderr.write(f"error: {exc.field}: {exc.message}\n")
        return EXIT_BAD_INPUT
    except ProbeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_RUN_FAILED
    for url in deleted:
        sys.stdout.write(f"deleted {url}\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["cleanup"]:
        return cleanup_main(args[1:])
    parser = _Parser(
        prog="python -m workers.engine", description="Measure reads of a file from an endpoint."
    )
    add_probe_arguments(parser)
    parser.nagios = "--nagios" in args
    options = vars(parser.parse_args(args))
    if options["nagios"]:
        verdict = nagios_probe(options)
        sys.stdout.write(verdict.line + "\n")
        return int(verdict.state)
    if options["warning"] is not None or options["critical"] is not None:
        sys.stderr.write("error: --warning and --critical need --nagios\n")
        return EXIT_BAD_INPUT
    try:
        params = params_from_options(options)
    except InvalidParams as exc:
        sys.stderr.write(f"error: {exc.field}: {exc.message} ({parser.prog} -h for help)\n")
        return EXIT_BAD_INPUT
    warn_unreachable_fraction(params, sys.stderr)
    return execute(params, as_json=bool(options["json"]), out=sys.stdout, err=sys.stderr)


def nagios_probe(options: dict[str, object]) -> Verdict:
    """`probe --nagios`: validate everything, run, judge. Bad input is UNKNOWN (naming the
    option), as is a failure of our own; nothing is written but the verdict's line."""
    try:
        thresholds = parse_probe_thresholds(
            _text(options.get("warning")), _text(options.get("critical"))
        )
        if options.get("json"):
            raise InvalidParams("json", "give --json or --nagios, not both")
        params = params_from_options(options)
    except BadThreshold as exc:
        return unknown(f"{exc.flag}: {exc.message}")
    except InvalidParams as exc:
        return unknown(f"--{exc.field.replace('_', '-')}: {exc.message}")
    return nagios_execute(params, thresholds)


def nagios_execute(params: RunParams, thresholds: dict[str, Thresholds]) -> Verdict:
    try:
        result = run_probe(params)
    except InvalidParams as exc:
        return unknown(f"--{exc.field.replace('_', '-')}: {exc.message}")
    except Exception as exc:  # a plugin reports its own failure as UNKNOWN
        return unknown(f"harness: the probe failed: {type(exc).__name__}: {exc}")
    return judge_run(result, thresholds)


def warn_unreachable_fraction(params: RunParams, err: TextIO) -> None:
    why = params.unreachable_fraction()
    if why is not None:
        err.write(f"warning: fraction: {why}\n")
