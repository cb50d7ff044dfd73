"""Launch to first read from a remote vantage point's agent, beside a deployment's own worker,
on one RabbitMQ broker, with a credential (issue 17; docs/vantage-points.md).

    .venv/bin/python benches/launch_remote.py --trials 20

The central side uses RabbitMQ (a virtual host of the benchmark's own, removed after) and the
benchmark database (benches/django_bench.py); the agent API is served by `manage.py
runserver` on that database. Two consumers: a deployment's worker (`celery -A webapp worker
-Q vantage.local`, which reads the run and decrypts its credential from the database) and an
enrolled agent (`python -m workers.agent run` for vantage point bench-remote, which claims
the run over HTTP and opens its sealed credential). Trials alternate between them: one-run
campaigns on the lab's local token door (roots://, a token: 1 client, random 4 KiB reads).
The parts are those of benches/launch_to_first_read.py; the first trial of each consumer is
reported apart (imports, fork server).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
from django_bench import ROOT, setup_django
from launch_to_first_read import one_trial, report

ADMIN = "http://guest:guest@127.0.0.1:15672"
REMOTE = "bench-remote"


def serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    with log.open("wb") as out:
        server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError(f"runserver did not answer: {log.read_text()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    vhost = f"fedprobe-bench-{secrets.token_hex(3)}"
    httpx.put(f"{ADMIN}/api/vhosts/{vhost}").raise_for_status()
    everything = {"configure": ".*", "write": ".*", "read": ".*"}
    httpx.put(f"{ADMIN}/api/permissions/{vhost}/guest", json=everything).raise_for_status()
    broker = f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    os.environ["FEDPROBE_BROKER_ADMIN_URL"] = ADMIN
    os.environ["FEDPROBE_AGENT_BROKER_URL"] = f"amqp://127.0.0.1:5672/{vhost}"
    work = Path(tempfile.mkdtemp(prefix="fedprobe-bench-remote-"))
    try:
        sys.path.insert(0, str(ROOT))
        from benches.common import running_lab

        with running_lab(None, "test", [1 << 20], base_port=27100) as lab:
            os.environ["FEDPROBE_CA_DIR"] = str(lab.ca_dir())
            setup_django(broker_url=broker)
            run_trials(lab, work, broker, args.trials)
    finally:
        httpx.delete(f"{ADMIN}/api/vhosts/{vhost}")


def run_trials(lab: Any, work: Path, broker: str, trials: int) -> None:
    from django.core.management import call_command

    from tests.celery_worker import WorkerProcess
    from tests.servers import free_port
    from webapp.demo.services import lab_register
    from webapp.sites.models import Endpoint, VantagePoint

    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="local-roots")
    env = {**os.environ, "FEDPROBE_BROKER_URL": broker}
    port = free_port()
    server = serve(env, port, work / "server.log")
    out = StringIO()
    call_command("vantage", "enrol", REMOTE, stdout=out, stderr=StringIO())
    agent_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work),
        "FEDPROBE_AGENT_DIR": str(work / "agent"),
        "FEDPROBE_EGRESS_ALLOW": "127.0.0.0/8,::1/128",
        "FEDPROBE_CA_DIR": str(lab.ca_dir()),
    }
    enrol = [sys.executable, "-m", "workers.agent", "enrol", f"http://127.0.0.1:{port}", "-"]
    subprocess.run(enrol, input=out.getvalue(), text=True, env=agent_env, cwd=ROOT, check=True)
    agent = WorkerProcess(
        REMOTE,
        [f"vantage.{REMOTE}"],
        agent_env,
        work / "agent.log",
        argv=[sys.executable, "-m", "workers.agent", "run"],
    )
    local = WorkerProcess("bench", ["vantage.local"], env, work / "worker.log")
    consumers = {"local": VantagePoint.local(), REMOTE: VantagePoint.objects.get(name=REMOTE)}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in consumers}
    try:
        for worker in (agent.start(), local.start()):
            worker.wait_ready()
        for _ in range(trials + 1):
            for name, vantage_point in consumers.items():
                results[name].append(one_trial(endpoint, vantage_point))
    finally:
        for worker in (agent, local):
            worker.stop()
        server.terminate()
        server.wait()
    for name, samples in results.items():
        report(f"\n{name}: first", samples)


if __name__ == "__main__":
    main()
