"""A remote vantage point end to end (issue 17, items 6-11; docs/vantage-points.md): an admin
enrols it; its agent runs on a test host of its own (a network namespace that reaches the
broker, the server and the lab's doors, and not PostgreSQL), with none of the central secrets
in its environment; it makes its keys there, gets a RabbitMQ account that reaches only its
queue, measures the lab's token and proxy doors with credentials sealed to its key, and
reports through the agent API into the real database; revoking it ends its token, its broker
account (the agent is cut off) and its queued runs. A write run lost with the agent (kill -9
mid-write) has its files deleted by the agent once it polls again.

The broker is the machine's RabbitMQ, in a virtual host of the test's own (removed after);
the server is Django's live server; the agent runs as `python -m workers.agent run`."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import amqp
import httpx
import kombu
import pytest
from django.conf import settings
from django.core.management import call_command

from tests.celery_worker import REPO, WorkerProcess, wait_until
from tests.netns import remote_host
from tests.rabbitmq import RABBIT_ADMIN
from tests.servers import free_port
from tests.workers.test_celery_credentials import campaign, endpoint
from webapp.campaigns.models import Run, RunCleanup
from webapp.campaigns.services import campaign_launch, runs_reap
from webapp.sites.models import VantagePoint, WorkerHeartbeat
from workers.agent.api import AgentApi, AgentApiError
from workers.agent.config import AgentConfig, amqp_tls_options
from workers.agent.sealing import encode_key
from workers.lab import Lab

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

NAME = "remote-a"
BROKER_PORT, POSTGRES_PORT = 5672, 5432
# What a remote host must never hold: the central side's own settings.
CENTRAL_VARIABLES = (
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "FEDPROBE_SECRET_KEY",
    "FEDPROBE_CREDENTIAL_KEY",
    "FEDPROBE_BROKER_URL",
    "FEDPROBE_BROKER_ADMIN_URL",
)


def agent_env(lab: Lab, folder: Path, home: Path) -> dict[str, str]:
    """All a remote host's agent is given: its folder, its own egress policy and CA folder."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "FEDPROBE_AGENT_DIR": str(folder),
        "FEDPROBE_EGRESS_ALLOW": "127.0.0.0/8,::1/128",
        "FEDPROBE_CA_DIR": str(lab.ca_dir()),
        "FEDPROBE_SECRETS_DIR": str(home / "secrets"),
        "FEDPROBE_WORKER_HEARTBEAT_S": "2",
    }


def enrol(
    live_server: Any, env: dict[str, str], inside: Sequence[str] = (), ca_file: str = ""
) -> str:
    """`manage.py vantage enrol NAME`, then the agent's `enrol` on the remote host (`inside`:
    the command prefix that runs there); returns what the agent printed."""
    out, err = StringIO(), StringIO()
    call_command("vantage", "enrol", NAME, stdout=out, stderr=err)
    token = out.getvalue().strip()
    assert "python -m workers.agent enrol" in err.getvalue()
    done = subprocess.run(
        [*inside, sys.executable, "-m", "workers.agent", "enrol", live_server.url, "-"]
        + (["--ca-file", ca_file] if ca_file else []),
        input=token + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def agent(name: str, env: dict[str, str], log: Path, inside: Sequence[str]) -> WorkerProcess:
    argv = [*inside, sys.executable, "-m", "workers.agent", "run"]
    return WorkerProcess(name, (f"vantage.{name}",), env, log, argv=argv)


@pytest.fixture
def broker_tls(lab: Lab, settings: Any, vhost: str) -> Iterator[int]:
    """RabbitMQ behind TLS with the lab's host certificate (localhost): agents are told to
    connect with amqps:// and verify it against the lab's CA. Yields the TLS port."""
    port = free_port()
    tls = lab.server_tls()
    listen = (
        f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,verify=0,"
        f"cert={tls.cert},key={tls.key}"
    )
    terminator = subprocess.Popen(["socat", listen, f"TCP:127.0.0.1:{BROKER_PORT}"])
    try:
        wait_for_port(port)
        settings.FEDPROBE_AGENT_BROKER_URL = f"amqps://localhost:{port}/{vhost}"
        yield port
    finally:
        terminator.terminate()
        terminator.wait()


def wait_for_port(port: int) -> None:
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def test_an_agent_on_a_host_of_its_own_measures_sealed_credentials_and_revocation_ends_it(
    lab: Lab, live_server: Any, central: str, broker_tls: int, tmp_path: Path
) -> None:
    folder, home = tmp_path / "agent", tmp_path / "home"
    home.mkdir()
    env = agent_env(lab, folder, home)
    assert not set(CENTRAL_VARIABLES) & set(env)
    token = lab.mint_token()
    proxy = lab.write_proxy(tmp_path / "proxy").read_text()
    endpoints = [
        endpoint(lab, "local-roots", "token", token),
        endpoint(lab, "local-gsi-root", "x509-proxy", proxy),
    ]
    doors = [port_of(lab.endpoint(name).url) for name in ("local-roots", "local-gsi-root")]
    with remote_host([broker_tls, port_of(live_server.url), *doors]) as host:
        assert host.reaches("127.0.0.1", broker_tls)
        assert not host.reaches("127.0.0.1", BROKER_PORT)  # only through TLS
        assert not host.reaches("127.0.0.1", POSTGRES_PORT)
        assert not host.reaches(host.gateway, POSTGRES_PORT)
        inside = host.command([])
        enrolled_as(enrol(live_server, env, inside, str(lab.ca_file())), folder)
        worker = agent(NAME, env, tmp_path / "agent.log", inside).start()
        try:
            worker.wait_ready()
            assert worker.process is not None
            environ = Path(f"/proc/{worker.process.pid}/environ").read_bytes().decode()
            assert not any(f"{name}=" in environ for name in CENTRAL_VARIABLES)
            measured = measure_through(worker, endpoints)
            assert sorted((run.status, run.auth) for run in measured) == [
                ("succeeded", "gsi"),
                ("succeeded", "token"),
            ], [run.errors for run in measured]
            assert all(run.worker.endswith(f"({NAME})") for run in measured)
            config, _ = AgentConfig.read(folder)
            assert config.broker_url.startswith(f"amqps://fedprobe-vp-{NAME}:")
            assert_the_broker_is_verified(config, lab)
            log = worker.log()
            broker_password = urlsplit(config.broker_url).password
            assert broker_password
            for secret in (token, proxy_key_line(proxy), config.agent_token, broker_password):
                assert secret not in log
            assert_revocation_ends_it(endpoints[0], config.agent_token, live_server.url)
            # Its broker account is gone: RabbitMQ closed its connection and refuses it.
            wait_until(lambda: "ACCESS_REFUSED" in worker.log(), 30, "the agent cut off", worker)
        finally:
            worker.stop()


def assert_the_broker_is_verified(config: AgentConfig, lab: Lab) -> None:
    """The agent's TLS to the broker checks the certificate against its CA file: one of
    another CA is refused (what the agent connected with above could have failed so)."""
    rogue_ca = next(lab.rogue_ca_dir().glob("*.0"))  # the other CA's certificate
    stranger = replace(config, server_ca_file=str(rogue_ca))
    options = amqp_tls_options(stranger.broker_url, stranger.server_ca_file)
    with (
        kombu.Connection(config.broker_url, ssl=options, connect_timeout=5) as connection,
        pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        connection.connect()


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def proxy_key_line(proxy: str) -> str:
    return max(proxy.split("PRIVATE KEY-----")[1].splitlines(), key=len)


def enrolled_as(printed: str, folder: Path) -> None:
    """The agent enrolled: the server keeps its public key, the private key and the agent
    token stayed on the remote host, which holds none of the central keys."""
    vantage_point = VantagePoint.objects.get(name=NAME)
    assert vantage_point.is_remote and not vantage_point.is_revoked
    assert f"enrolled as vantage point {NAME}" in printed
    config, key = AgentConfig.read(folder)  # refuses files open to others
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert vantage_point.public_key == encode_key(key.public_key)
    assert config.agent_token not in json.dumps(list(VantagePoint.objects.values()), default=str)
    held = "".join(path.read_text() for path in folder.iterdir())
    for secret in (settings.SECRET_KEY, *settings.FEDPROBE_CREDENTIAL_KEYS):
        assert secret not in held


def measure_through(worker: WorkerProcess, endpoints: list[Any]) -> list[Run]:
    """Launch a campaign on `endpoints` from the remote vantage point; its runs once ended,
    with the agent's health seen meanwhile."""
    runs = campaign_launch(campaign=campaign("remote", endpoints, NAME), trigger="api")
    ids = [run.pk for run in runs]

    def ended() -> bool:
        return not Run.objects.filter(pk__in=ids, status__in=("queued", "running")).exists()

    wait_until(ended, 120, "the remote vantage point's runs", worker)
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(queue=f"vantage.{NAME}").exists(),
        20,
        "the agent's health",
        worker,
    )
    return list(Run.objects.filter(pk__in=ids).order_by("pk"))


def assert_revocation_ends_it(measured: Any, agent_token: str, server: str) -> None:
    """Revoked while a run waits for it: the run ends as a tester fault saying so, the
    broker account is gone, and the agent token is refused."""
    waiting = campaign_launch(campaign=campaign("remote-2", [measured], NAME), trigger="api")
    out = StringIO()
    call_command("vantage", "revoke", NAME, stdout=out)
    assert f"{NAME} revoked; 1 of its runs ended" in out.getvalue()
    run = Run.objects.get(pk=waiting[0].pk)
    assert run.status == "failed"
    assert run.errors[0]["class"] == "harness"
    assert f"vantage point {NAME} was revoked" in run.errors[0]["message"]
    assert run.is_tester_fault
    with httpx.Client(base_url=f"{RABBIT_ADMIN}/api/", timeout=10) as admin:
        assert admin.get(f"users/fedprobe-vp-{NAME}").status_code == 404
    api = AgentApi(server, token=agent_token)
    with pytest.raises(AgentApiError) as refused:
        api.heartbeat({"hostname": "h", "pid": 1})
    assert refused.value.status == 401


def test_the_agents_broker_account_reaches_its_own_queue_only(
    lab: Lab, live_server: Any, central: str, tmp_path: Path
) -> None:
    folder, home = tmp_path / "agent", tmp_path / "home"
    home.mkdir()
    enrol(live_server, agent_env(lab, folder, home))
    config, _ = AgentConfig.read(folder)
    with kombu.Connection(config.broker_url, connect_timeout=10) as connection:
        own = connection.channel()
        own.queue_declare(queue=config.queue, durable=True, auto_delete=False)  # allowed
        own.close()
        other = connection.channel()
        with pytest.raises(Exception, match=r"ACCESS_REFUSED"):
            other.queue_declare(queue="vantage.local", durable=True, auto_delete=False)
        publisher = connection.channel()
        publisher.basic_publish(
            amqp.Message(b"x"), exchange="vantage.local", routing_key="vantage.local"
        )
        with pytest.raises(Exception, match=r"ACCESS_REFUSED"):
            publisher.basic_qos(0, 1, False)  # the publish's refusal comes on the next call


MiB = 1024 * 1024


def test_a_write_lost_with_its_agent_is_cleaned_up_by_the_agents_next_poll(
    lab: Lab, live_server: Any, central: str, tmp_path: Path
) -> None:
    """The agent is killed -9 (main process, pool process, clients: its host dies) while its
    clients write 1 GiB each through the lab's token door; the reaper ends the run lost and
    records its cleanup; the agent started again asks for it, gets the door's write token
    sealed to its key, deletes the two files and nothing else, and reports it done."""
    folder, home = tmp_path / "agent", tmp_path / "home"
    home.mkdir()
    env = agent_env(lab, folder, home)
    token = lab.token_file("write").read_text().strip()
    door = endpoint(lab, "local-roots", "token", token)
    door.scratch_path = lab.endpoint("local-roots").scratch_path
    door.save()
    scratch = Path(lab.state_dir) / "data" / "scratch" / lab.endpoint("local-roots").site
    others = ["fedprobe-0-c0-f0", "not-ours"]
    for name in others:
        (scratch / name).write_bytes(b"keep me")
    ports = [BROKER_PORT, port_of(live_server.url), port_of(door.base_url)]
    try:
        with remote_host(ports) as host:
            inside = host.command([])
            enrol(live_server, env, inside)
            first = agent(NAME, env, tmp_path / "agent.log", inside).start()
            run = killed_mid_write(first, door, scratch)
            tag = f"fedprobe-{run.run_tag}-"
            left = still(scratch, tag)
            assert left == [f"{tag}c0-f0", f"{tag}c1-f0"]
            wait_until(lambda: runs_reap(stale_after_s=5) == 1, 30, "the reaper")
            assert Run.objects.get(pk=run.pk).status == "failed"
            assert RunCleanup.objects.get(run=run).status == "pending"
            again = agent(NAME, env, tmp_path / "agent-again.log", inside).start()
            try:
                again.wait_ready()
                wait_until(
                    lambda: RunCleanup.objects.get(run=run).status != "pending",
                    60,
                    "the agent's cleanup",
                    again,
                )
                log = again.log()
            finally:
                again.stop()
        cleanup = RunCleanup.objects.get(run=run)
        assert (cleanup.status, cleanup.deleted, cleanup.attempts) == ("done", 2, 1), cleanup.error
        assert [n for n in os.listdir(scratch) if n.startswith(tag)] == []
        for name in others:
            assert (scratch / name).read_bytes() == b"keep me"
        config, _ = AgentConfig.read(folder)
        assert f"run {run.pk}: cleanup deleted 2 files" in log
        for secret in (token, config.agent_token):
            assert secret not in log and secret not in first.log()
        # The killed run's credential folder and the cleanup's are gone.
        secrets = home / "secrets"
        assert not secrets.exists() or list(secrets.iterdir()) == []
    finally:
        for name in others:
            (scratch / name).unlink(missing_ok=True)


def killed_mid_write(agent: WorkerProcess, door: Any, scratch: Path) -> Run:
    """A write run of 2 clients the agent measures, the agent killed -9 (main process, pool
    process and clients, as if its host died) once both clients write into `scratch`."""
    try:
        agent.wait_ready()
        writes = campaign(
            "lost-write",
            [door],
            NAME,
            operations=["write"],
            file_size=1024 * MiB,
            read_sizes=[16 * 1024],
            patterns=["sequential"],
            fractions=[1.0],
        )
        (run,) = campaign_launch(campaign=writes, trigger="api")
        tag = f"fedprobe-{run.run_tag}-"
        wait_until(
            lambda: len([n for n in os.listdir(scratch) if n.startswith(tag)]) == 2,
            60,
            "both clients writing",
            agent,
        )
        agent.kill_host()  # nothing deletes what was written
    finally:
        agent.stop()
    return run


def still(folder: Path, prefix: str) -> list[str]:
    """The names starting with `prefix` once their sizes stop changing."""
    sizes: dict[str, int] = {}
    for _ in range(100):
        now = {n: (folder / n).stat().st_size for n in os.listdir(folder) if n.startswith(prefix)}
        if now == sizes:
            return sorted(now)
        sizes = now
        time.sleep(0.2)
    raise AssertionError(f"still being written: {sizes}")
