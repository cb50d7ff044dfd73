"""What TLS and authentication cost, and does the engine pay more for them than a bare loop?

One section per invocation, each under 10 minutes on the lab VM (the figures in
docs/benchmarks.md came from exactly these):

    .venv/bin/python benches/auth_cost.py price [--lab-dir DIR]             # ~4.5-7 min
    .venv/bin/python benches/auth_cost.py bare [--lab-dir DIR] --doors roots gsi-root
    .venv/bin/python benches/auth_cost.py bare [--lab-dir DIR] --doors roots gsi-root \
        --workload "sync random 4 KiB" --trials 31
    .venv/bin/python benches/auth_cost.py bare [--lab-dir DIR] --doors https gsi-https \
        --workload "sync random 4 KiB" --trials 21
    .venv/bin/python benches/auth_cost.py bare [--lab-dir DIR] --doors https gsi-https \
        --workload "sequential 1 MiB"
    .venv/bin/python benches/auth_cost.py near                              # ~2 min
    .venv/bin/python benches/auth_cost.py profile [--lab-dir DIR] --doors roots [--top 25]

(`bare` without --doors measures all four authenticated doors, both workloads, 15 trials:
~10-12 minutes, hence the pairs above.) Options: --opens N (runs per door for the opens;
price 40, near 25), --trials N (price 9, bare 15), --pin (price, bare: the local site's
xrootds on CPU 0, this benchmark and its clients on CPU 1).

`price`: at the lab's local site (profile test, no relay, no added RTT), each door side by
side: root:// (anonymous), roots:// + token (ztn), root:// + gsi (X.509 proxy), http://
(anonymous), https:// + token (Authorization: Bearer), https:// + x509 (the proxy as TLS
client certificate). Measured with the engine (run_probe, one client): the open (a run of
one 4 KiB read of /fedprobe/file-1M, so every open is a fresh client process's first
connection), sync random 4 KiB reads and sequential 1 MiB reads of /fedprobe/file-256M
(the workloads of engine_vs_bare.py), the doors' order rotating from trial to trial.

`bare`: the engine against a bare loop with the same TLS and credential (engine_vs_bare.py
for the authenticated doors): same offsets (patterns.plan_requests), same process model
(common.in_client_process), only the read loops timed, trials alternating who goes first.
The bare XrdCl loop gets its credential as any grid client does, from the environment set in
its process before the first connection (BEARER_TOKEN_FILE + XrdSecPROTOCOL=ztn,
X509_USER_PROXY + XrdSecPROTOCOL=gsi, X509_CERT_DIR); the bare httpx loop verifies with
ssl.create_default_context(capath=CA dir), loads the proxy as client certificate or sends
`Authorization: Bearer`, opens with a one-byte GET and reads each range streamed (iter_raw).

`near`: a paper-profile lab (near site 26 ms RTT through the relay, local 0.5 ms) started on
a free base port, stopped and removed after (or a running one, --paper-lab-dir): the open of
every door at both sites, alternating; open / RTT, and the round trips the near site adds
over the local one ((near - local) / (26 - 0.5) ms); HTTP opens split with open_phases_s.

`profile`: cProfile of the engine's client (workers.engine.client.Client: open, read loop,
close) and of the bare loop, each in a client process, for one door and workload.

Without a running lab in --lab-dir, `price`, `bare` and `profile` start their own (profile
test, on a free base port) and stop and remove it after. Medians over trials with their
interquartile ranges; the machine's load average is printed before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import in_client_process, running_lab
from engine_vs_bare import FILE, FILE_SIZE, pin_apart, rate, workloads

from workers.engine import Method, Pattern, RunParams, run_probe
from workers.engine.credentials import Access, AuthMethod, Credential
from workers.engine.metrics import ClientResult
from workers.engine.patterns import client_seed, plan_requests
from workers.engine.results import RunResult
from workers.lab import Lab
from workers.lab.ports import free_base_port

MiB = 1024 * 1024
SMALL_FILE = "/fedprobe/file-1M"
# One 4 KiB read of the 1 MiB file: a run that is almost only its open.
OPEN_FIELDS: dict[str, Any] = {
    "pattern": Pattern.RANDOM,
    "read_size": 4096,
    "fraction": 4096 / MiB,
}
WORKLOADS = ("sync random 4 KiB", "sequential 1 MiB")
# The grid clients' discovery variables: cleared in a bare loop's process before its own.
DISCOVERY = ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "X509_USER_PROXY", "X509_USER_CERT")


@dataclass(frozen=True)
class Door:
    """One way into a site: the lab endpoint `<site>-<suffix>` and what it is shown."""

    label: str
    suffix: str
    credential: str  # none, token, proxy
    family: str  # root or http: the anonymous door of the same protocol is its baseline

    @property
    def http(self) -> bool:
        return self.family == "http"


DOORS = (
    Door("root:// (anonymous)", "root", "none", "root"),
    Door("roots:// + token (ztn)", "roots", "token", "root"),
    Door("root:// + gsi (proxy)", "gsi-root", "proxy", "root"),
    Door("http:// (anonymous)", "http", "none", "http"),
    Door("https:// + token", "https", "token", "http"),
    Door("https:// + x509 (proxy as client cert)", "gsi-https", "proxy", "http"),
)
BASELINE = {"root": DOORS[0], "http": DOORS[3]}
BARE_DOORS = tuple(d for d in DOORS if d.credential != "none")


class Credentials:
    """A token (in a 0600 file of a private folder) and a proxy of the lab, and its CA dir."""

    def __init__(self, lab: Lab, lifetime_s: float) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fedprobe-auth-cost-"))  # 0700
        self.token_file = self.folder / "token"
        self.token_file.touch(mode=0o600)  # XrdSecztn refuses a token file others may read
        self.token_file.write_text(lab.mint_token(lifetime_s=lifetime_s) + "\n")
        self.proxy_file = lab.write_proxy(self.folder / "x509_proxy")
        self.ca_dir = str(lab.ca_dir())
        self.token = Credential.token(self.token_file.read_text())
        self.proxy = Credential.x509_proxy(self.proxy_file.read_text())

    def for_door(self, door: Door) -> Credential | None:
        return {"none": None, "token": self.token, "proxy": self.proxy}[door.credential]

    def environment(self, door: Door) -> dict[str, str]:
        """What a grid client's process is given for this door (XrdCl reads it)."""
        env = {"X509_CERT_DIR": self.ca_dir}
        if door.credential == "token":
            env.update(BEARER_TOKEN_FILE=str(self.token_file), XrdSecPROTOCOL="ztn")
        elif door.credential == "proxy":
            env.update(X509_USER_PROXY=str(self.proxy_file), XrdSecPROTOCOL="gsi")
        return env

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# -- the engine ------------------------------------------------------------------------------


def engine_run(url: str, door: Door, creds: Credentials, fields: dict[str, Any]) -> RunResult:
    run = run_probe(
        RunParams(
            urls=(url,),
            method=Method.DIRECT,
            credential=creds.for_door(door),
            ca_dir=creds.ca_dir,
            **fields,
        )
    )
    if run.status != "succeeded":
        raise SystemExit(f"{door.label} at {url}: {run.status}: {run.to_json()['errors']}")
    return run


def engine_read(
    url: str, door: Door, creds: Credentials, fields: dict[str, Any]
) -> tuple[float, int, int, float]:
    """(read seconds, ops, bytes, client CPU seconds) of one engine run."""
    (client,) = engine_run(url, door, creds, fields).clients
    return client.read_s, client.ops, client.bytes_read, client.cpu_user_s + client.cpu_sys_s


# -- the bare loops (each in a process of its own, forked as the engine forks its clients) ---


def _plan(fields: dict[str, Any]) -> list[tuple[int, int]]:
    return plan_requests(
        fields["pattern"],
        file_size=FILE_SIZE,
        read_size=fields["read_size"],
        fraction=fields["fraction"],
        seed=client_seed(1, 0, 0),
    )


def bare_xroot(url: str, fields: dict[str, Any], env: dict[str, str]) -> tuple[float, float]:
    """(seconds, CPU seconds) of a bare XrdCl loop, its credential from the environment."""
    for name in DISCOVERY:
        os.environ.pop(name, None)
    os.environ.update(env)  # before the first connection: XrdCl reads them when it needs them
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    plan = _plan(fields)
    scheme, rest = url.split("://", 1)
    user_url = f"{scheme}://bare@{rest}"
    elapsed = cpu = 0.0
    for _ in range(fields.get("files", 1)):  # like the engine: open, read, close per file
        f = client.File()
        status, _ = f.open(user_url, OpenFlags.READ)
        assert status.ok, status
        started, cpu_started = time.perf_counter(), time.process_time()
        for offset, size in plan:
            _status, _data = f.read(offset, size)
        elapsed += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        f.close()
    return elapsed, cpu


def bare_http(
    url: str, fields: dict[str, Any], token_file: str | None, proxy_file: str | None, ca_dir: str
) -> tuple[float, float]:
    """(seconds, CPU seconds) of a bare httpx loop: one client (connection) per file, Range
    GETs streamed raw, TLS verified against the CA dir."""
    import ssl

    import httpx

    context = ssl.create_default_context(capath=ca_dir)
    if proxy_file:
        context.load_cert_chain(proxy_file)
    headers = {"Accept-Encoding": "identity"}
    if token_file:
        headers["Authorization"] = "Bearer " + Path(token_file).read_text().strip()
    plan = _plan(fields)
    elapsed = cpu = 0.0
    for _ in range(fields.get("files", 1)):
        with httpx.Client(verify=context, headers=headers, trust_env=False) as http:
            opened = http.get(url, headers={"Range": "bytes=0-0"})  # connect, TLS, open
            assert opened.status_code == 206, opened.status_code
            started, cpu_started = time.perf_counter(), time.process_time()
            received = 0
            for offset, size in plan:
                ranges = {"Range": f"bytes={offset}-{offset + size - 1}"}
                with http.stream("GET", url, headers=ranges) as response:
                    data = b"".join(response.iter_raw())
                received += len(data)
            elapsed += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
        assert received == sum(size for _, size in plan), received
    return elapsed, cpu


def bare_read(
    url: str, door: Door, creds: Credentials, fields: dict[str, Any]
) -> tuple[float, float]:
    if door.http:
        token = str(creds.token_file) if door.credential == "token" else None
        proxy = str(creds.proxy_file) if door.credential == "proxy" else None
        return in_client_process(bare_http, url, fields, token, proxy, creds.ca_dir)
    return in_client_process(bare_xroot, url, fields, creds.environment(door))


# -- helpers ---------------------------------------------------------------------------------


def rotated(items: Sequence[Any], by: int) -> list[Any]:
    """`items` starting at `by`: over the trials every item goes first, and each follows
    every other one as often."""
    by %= len(items)
    return list(items[by:]) + list(items[:by])


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, first quartile, third quartile)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q2, q1, q3


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


def url_of(lab: Lab, site: str, door: Door, path: str) -> str:
    return lab.endpoint(f"{site}-{door.suffix}").file_url(path)


def check_test_lab(lab: Lab) -> None:
    local = lab.endpoint("local-root")
    if local.rtt_ms != 0.0 or not any(f.path == FILE for f in local.files):
        raise SystemExit(
            f"{lab.state_dir}: the local site must have no added RTT (profile test) and "
            f"serve {FILE}"
        )


def pin(lab: Lab) -> None:
    """The local site's three xrootds on CPU 0, this benchmark and its clients on CPU 1."""
    running = lab.running_processes()
    for name in ("xrootd-local-token", "xrootd-local-gsi"):
        for task in os.listdir(f"/proc/{running[name]}/task"):
            os.sched_setaffinity(int(task), {0})
    pin_apart(running["xrootd-local"])


def opens(
    lab: Lab, creds: Credentials, targets: Sequence[tuple[str, Door]], rounds: int
) -> dict[tuple[str, Door], list[RunResult]]:
    """`rounds` runs of one 4 KiB read per (site, door), the order rotating every round."""
    runs: dict[tuple[str, Door], list[RunResult]] = {target: [] for target in targets}
    for r in range(rounds):
        for site, door in rotated(targets, r):
            url = url_of(lab, site, door, SMALL_FILE)
            runs[site, door].append(engine_run(url, door, creds, OPEN_FIELDS))
    return runs


def only_client(run: RunResult) -> ClientResult:
    (client,) = run.clients
    return client


def slow(clients: Sequence[ClientResult]) -> int:
    """Opens that took over a second: on the lab VM, ~1-2% of fresh XrdCl connections wait
    5 s at login for a resolver answer that was lost (glibc's timeout)."""
    return sum(1 for c in clients if c.open_s > 1.0)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


def tls_of(run: RunResult) -> str:
    tls = run.negotiated.tls
    if tls is None:
        return "none"
    return f"{tls.get('version') or '?'} {tls.get('cipher') or ''}".strip()


# -- the sections ----------------------------------------------------------------------------


def section_price(lab: Lab, creds: Credentials, args: argparse.Namespace) -> None:
    targets = [("local", door) for door in DOORS]
    print(f"## price: local site ({load()})\n", flush=True)
    runs = opens(lab, creds, targets, args.opens)
    print(f"open of {SMALL_FILE} in a fresh client, {args.opens} runs per door:\n")
    print(
        "| door | auth | TLS | open p50 ms | IQR ms | of it: connect ms | of it: TLS ms "
        "| opens over 1 s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for target in targets:
        door = target[1]
        clients = [only_client(run) for run in runs[target]]
        p50, q1, q3 = spread([c.open_s for c in clients])
        phases = []
        for phase in ("connect", "tls"):
            values = [c.open_phases_s[phase] for c in clients if phase in c.open_phases_s]
            phases.append(ms(statistics.median(values)) if values else "-")
        first = runs[target][0]
        print(
            f"| {door.label} | {first.auth} | {tls_of(first)} | {ms(p50)} "
            f"| {ms(q1)}-{ms(q3)} | {phases[0]} | {phases[1]} | {slow(clients)} |",
            flush=True,
        )
    print(f"\n({load()})\n", flush=True)
    all_fields = workloads()
    print(
        "| door | workload | unit | engine (median) | IQR | vs the anonymous door "
        "(median of per-trial ratios) | client CPU per op us |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in WORKLOADS:
        fields = all_fields[name]
        rates: dict[Door, list[float]] = {door: [] for door in DOORS}
        cpu: dict[Door, list[float]] = {door: [] for door in DOORS}
        ratios: dict[Door, list[float]] = {door: [] for door in DOORS}
        for trial in range(args.trials):
            this_trial = {}
            for door in rotated(DOORS, trial):
                read_s, ops, n_bytes, cpu_s = engine_read(
                    url_of(lab, "local", door, FILE), door, creds, fields
                )
                unit, value = rate(fields, read_s, ops, n_bytes)
                this_trial[door] = value
                rates[door].append(value)
                cpu[door].append(cpu_s / ops * 1e6)
            for door in DOORS:
                ratios[door].append(this_trial[door] / this_trial[BASELINE[door.family]])
        for door in DOORS:
            p50, q1, q3 = spread(rates[door])
            ratio = statistics.median(ratios[door])
            print(
                f"| {door.label} | {name} | {unit} | {p50:,.0f} | {q1:,.0f}-{q3:,.0f} "
                f"| {ratio:.1%} | {statistics.median(cpu[door]):.1f} |",
                flush=True,
            )
    print(f"\n({load()})", flush=True)


def section_bare(lab: Lab, creds: Credentials, args: argparse.Namespace) -> None:
    doors = [d for d in BARE_DOORS if not args.doors or d.suffix in args.doors]
    print(f"## bare: engine vs bare loop, local site ({load()})\n", flush=True)
    print(
        "| door | workload | unit | engine | bare loop | engine / bare (median of pairs) "
        "| IQR | client CPU per op, engine / bare |"
    )
    print("|---|---|---|---|---|---|---|---|")
    all_fields = workloads()
    for door in doors:
        url = url_of(lab, "local", door, FILE)
        for name in [args.workload] if args.workload else WORKLOADS:
            fields = all_fields[name]
            engine_rates, bare_rates, ratios, engine_cpu, bare_cpu = [], [], [], [], []
            for trial in range(args.trials):
                # Alternate who goes first: the server's page cache and CPU drift evenly.
                if trial % 2:
                    bare_s, bare_cpu_s = bare_read(url, door, creds, fields)
                    read_s, ops, n_bytes, cpu_s = engine_read(url, door, creds, fields)
                else:
                    read_s, ops, n_bytes, cpu_s = engine_read(url, door, creds, fields)
                    bare_s, bare_cpu_s = bare_read(url, door, creds, fields)
                unit, engine_rate = rate(fields, read_s, ops, n_bytes)
                _, bare_rate = rate(fields, bare_s, ops, n_bytes)
                engine_rates.append(engine_rate)
                bare_rates.append(bare_rate)
                ratios.append(engine_rate / bare_rate)
                engine_cpu.append(cpu_s / ops * 1e6)
                bare_cpu.append(bare_cpu_s / ops * 1e6)
            ratio, q1, q3 = spread(ratios)
            print(
                f"| {door.label} | {name} | {unit} | {statistics.median(engine_rates):,.0f} "
                f"| {statistics.median(bare_rates):,.0f} | {ratio:.1%} | {q1:.0%}-{q3:.0%} "
                f"| {statistics.median(engine_cpu):.1f} / {statistics.median(bare_cpu):.1f} |",
                flush=True,
            )
    print(f"\n({load()})", flush=True)


def section_near(lab: Lab, creds: Credentials, args: argparse.Namespace) -> None:
    near_rtt = lab.endpoint("near-root").rtt_ms / 1e3
    local_rtt = lab.endpoint("local-root").rtt_ms / 1e3
    targets = [(site, door) for door in DOORS for site in ("local", "near")]
    print(f"## near: paper profile ({load()})\n", flush=True)
    runs = opens(lab, creds, targets, args.opens)
    print(
        f"open of {SMALL_FILE} in a fresh client, {args.opens} runs per door and site; RTT "
        f"local {local_rtt * 1e3:g} ms, near {near_rtt * 1e3:g} ms (the relay's)\n"
    )
    print(
        "| door | local open p50 ms | near open p50 ms | near IQR ms | near open / RTT "
        f"| extra round trips at near ((near - local) / {(near_rtt - local_rtt) * 1e3:g} ms) "
        "| preflight RTT p50 ms "
        "| opens over 1 s (local, near) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for door in DOORS:
        local = [only_client(run) for run in runs["local", door]]
        near = [only_client(run) for run in runs["near", door]]
        local_p50 = statistics.median([c.open_s for c in local])
        p50, q1, q3 = spread([c.open_s for c in near])
        preflight = statistics.median([run.preflight_rtt_s or 0.0 for run in runs["near", door]])
        extra = (p50 - local_p50) / (near_rtt - local_rtt)
        print(
            f"| {door.label} | {ms(local_p50)} | {ms(p50)} | {ms(q1)}-{ms(q3)} "
            f"| {p50 / near_rtt:.2f} | {extra:.2f} | {ms(preflight)} "
            f"| {slow(local)}, {slow(near)} |",
            flush=True,
        )
        rows.append((door, near))
    print("\nHTTP opens at the near site split (medians, ms, and in RTTs):\n")
    print("| door | TLS | open | connect | TLS handshake | the request (open - connect - TLS) |")
    print("|---|---|---|---|---|---|")
    for door, near in rows:
        if not door.http:
            continue
        opened = statistics.median([c.open_s for c in near])
        connect = statistics.median([c.open_phases_s.get("connect", 0.0) for c in near])
        tls = statistics.median([c.open_phases_s.get("tls", 0.0) for c in near])
        rest = statistics.median(
            [
                c.open_s - c.open_phases_s.get("connect", 0.0) - c.open_phases_s.get("tls", 0.0)
                for c in near
            ]
        )
        cells = [f"{ms(v)} ({v / near_rtt:.2f})" for v in (opened, connect, tls, rest)]
        print(f"| {door.label} | {tls_of(runs['near', door][0])} | {' | '.join(cells)} |")
    print(f"\n({load()})", flush=True)


def access_for(door: Door, creds: Credentials) -> Access:
    """What the engine hands its client processes for this door (paths, no secrets)."""
    auth = {
        ("token", False): AuthMethod.TOKEN,
        ("token", True): AuthMethod.TOKEN,
        ("proxy", False): AuthMethod.GSI,
        ("proxy", True): AuthMethod.X509,
    }.get((door.credential, door.http), AuthMethod.NONE)
    return Access(
        auth,
        token_file=str(creds.token_file) if door.credential == "token" else None,
        proxy_file=str(creds.proxy_file) if door.credential == "proxy" else None,
        ca_dir=creds.ca_dir,
    )


def profiled_engine(url: str, fields: dict[str, Any], access: Access, top: int) -> str:
    """The engine's client (open, read loop, close) under cProfile, in this process."""
    import cProfile

    from workers.engine.client import Client, ClientSpec, FileTarget

    access.apply_environment()
    params = RunParams(urls=(url,), method=Method.DIRECT, ca_dir=access.ca_dir, **fields)
    targets = tuple(FileTarget(url, FILE_SIZE, i) for i in range(params.files))
    spec = ClientSpec(params, 0, targets, 600.0, tempfile.gettempdir(), None, 60.0, access)
    result = ClientResult(client=0)
    client = Client(spec, result, [0])
    profile = cProfile.Profile()
    profile.runcall(client.run)
    assert result.ok, result.error
    head = f"engine: read {result.read_s:.3f} s for {result.ops} ops (profiled)"
    return head + "\n" + stats_text(profile, top) + stats_text(profile, top, "workers/engine")


def profiled_bare(
    url: str, fields: dict[str, Any], door: Door, creds: Credentials, top: int
) -> str:
    import cProfile

    profile = cProfile.Profile()
    if door.http:
        token = str(creds.token_file) if door.credential == "token" else None
        proxy = str(creds.proxy_file) if door.credential == "proxy" else None
        seconds, _ = profile.runcall(bare_http, url, fields, token, proxy, creds.ca_dir)
    else:
        seconds, _ = profile.runcall(bare_xroot, url, fields, creds.environment(door))
    return f"bare loop: read {seconds:.3f} s (profiled)\n" + stats_text(profile, top)


def stats_text(profile: Any, top: int, only: str | None = None) -> str:
    """The `top` functions by own time; with `only`, those whose file path contains it."""
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    if only is None:
        stats.strip_dirs().sort_stats("tottime").print_stats(top)
    else:
        print(f"functions in {only}:", file=out)
        stats.sort_stats("tottime").print_stats(only, top)
    return out.getvalue()


def section_profile(lab: Lab, creds: Credentials, args: argparse.Namespace) -> None:
    """cProfile of the engine's client and of the bare loop, each in a client process."""
    doors = [d for d in BARE_DOORS if not args.doors or d.suffix in args.doors]
    name = args.workload or WORKLOADS[0]
    fields = workloads()[name]
    for door in doors:
        url = url_of(lab, "local", door, FILE)
        print(f"## profile: {door.label}, {name} ({load()})\n", flush=True)
        print(in_client_process(profiled_engine, url, fields, access_for(door, creds), args.top))
        print(in_client_process(profiled_bare, url, fields, door, creds, args.top), flush=True)


@contextlib.contextmanager
def lab_for(args: argparse.Namespace, profile: str) -> Iterator[Lab]:
    """The running lab of --lab-dir (--paper-lab-dir), else one of our own on a free base
    port, stopped and removed after."""
    lab_dir = args.paper_lab_dir if profile == "paper" else args.lab_dir
    ours = not (lab_dir and Lab(Path(lab_dir)).is_running())
    with running_lab(lab_dir, profile, base_port=free_base_port()) as lab:
        yield lab
    if ours and not lab.is_running():
        shutil.rmtree(lab.state_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("section", choices=("price", "bare", "near", "profile"))
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab", help="a running test lab")
    parser.add_argument("--paper-lab-dir", default=None, help="a running paper lab (near)")
    parser.add_argument("--opens", type=int, default=None, help="runs per door (and site)")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument(
        "--doors",
        nargs="*",
        choices=[d.suffix for d in BARE_DOORS],
        help="bare, profile: only these doors (endpoint suffixes)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="price, bare: the local xrootds on CPU 0, this benchmark and its clients on CPU 1",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default=None,
        help="bare: only this workload; profile: this one (default: the first)",
    )
    parser.add_argument("--top", type=int, default=25, help="profile: functions shown")
    parser.add_argument("--token-lifetime", type=float, default=3600.0)
    args = parser.parse_args()
    if args.opens is None:
        args.opens = {"price": 40, "near": 25}.get(args.section, 0)
    if args.trials is None:
        args.trials = {"price": 9, "bare": 15}.get(args.section, 0)
    profile = "paper" if args.section == "near" else "test"
    started = time.perf_counter()
    with lab_for(args, profile) as lab:
        if profile == "test":
            check_test_lab(lab)
        if args.pin and profile == "test":
            pin(lab)
        creds = Credentials(lab, args.token_lifetime)
        try:
            sections = {
                "price": section_price,
                "bare": section_bare,
                "near": section_near,
                "profile": section_profile,
            }
            sections[args.section](lab, creds, args)
        finally:
            creds.remove()
    print(f"\n{args.section}: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
