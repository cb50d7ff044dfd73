"""docker-compose.yml, run for real: built from nothing, brought up, measuring through nginx
and the worker, and through a remote vantage point's agent run as deploy/vantage-point.yml
runs it at a second site (enrolled through nginx, its broker account on RabbitMQ's TLS
port); no secret in any log; brought down (bin/test's compose stage).

What only running it found (docs/deployment.md, "What running it found"): nginx 1.22
refused `http2 on;`; nginx logged query strings (the image's own access_log beside ours);
every copy run ended egress (Docker's seccomp profile refuses process_vm_readv); the lab's
TLS doors failed with an unknown CA (its CA folder was in the lab's container only).

The stack runs on a Docker engine of the test's own, images made locally
(tests/compose/stack.py); everything it made is removed at the end, and the engine stopped.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import secrets
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.compose.stack import (
    AGENT_FILES,
    AGENT_PROJECT,
    BASE_IMAGE,
    PYTHON_IMAGE,
    DockerDaemon,
    Say,
    Stack,
    StackError,
    apt_install_missing,
    base_image,
    new_home,
    python_image,
    remove_tree,
    what_is_left,
)
from tests.servers import free_port

pytestmark = pytest.mark.compose

HOST = "localhost"
# The names the agent reaches nginx and RabbitMQ's TLS port by, on the stack's network.
SERVER_NAME, BROKER_NAME = "nginx", "rabbitmq"
REMOTE = "compose-remote"
USER = "prober"
# The lab's doors the campaign measures: a WLCG token (roots://, ztn) and an X.509 proxy
# (root:// with gsi), each read in place and copied (xrdcp) first.
TOKEN_DOOR, PROXY_DOOR = "local-roots", "local-gsi-root"
METHODS = ("direct", "copy")
TEST_FILE = "/fedprobe/file-16M"
RUNS_WAIT_S = 240
NGINX_WAIT_S = 30
# A JSON web token (the lab's tokens, any WLCG token) and a PEM block (a proxy's key).
JWT = re.compile(r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.")
PEM = "-----BEGIN"
# Endpoint credentials as stored (decrypted), read through `manage.py shell`'s stdin.
READ_CREDENTIALS = """
import json
from webapp.sites.models import Endpoint
print(json.dumps([e.credential for e in Endpoint.objects.exclude(credential_kind="none")]))
"""


def _say(config: pytest.Config) -> Say:
    """A line on the terminal as the stage goes (CI's log shows where the minutes go)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            terminal.write_line(line)

    return say


def _tls_files(folder: Path) -> None:
    """The deployment's certificate, nginx's and RabbitMQ's TLS port's, for localhost and the
    names the agent uses (self-signed: the test and the agent trust it by name)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [
        x509.DNSName(name) for name in (HOST, SERVER_NAME, BROKER_NAME)
    ]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(mode=0o755)
    (folder / "fullchain.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (folder / "privkey.pem").write_bytes(private)
    (folder / "privkey.pem").chmod(0o600)  # nginx's master process reads it, as root


def _settings(home: Path) -> dict[str, str]:
    """What an operator's .env holds (docs/deployment.md, "First start"), for this test."""
    return {
        "POSTGRES_PASSWORD": secrets.token_hex(24),
        "RABBITMQ_PASSWORD": secrets.token_hex(24),
        "FEDPROBE_SECRET_KEY": secrets.token_urlsafe(50),
        "FEDPROBE_CREDENTIAL_KEY": Fernet.generate_key().decode(),
        "FEDPROBE_ALLOWED_HOSTS": f"{HOST},{SERVER_NAME}",
        "FEDPROBE_METRICS_TOKEN": secrets.token_urlsafe(32),
        # The monitoring services are out of the test stack (compose.test.yml) but compose
        # reads the whole file.
        "GRAFANA_DB_PASSWORD": secrets.token_hex(24),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(24),
        "FEDPROBE_TLS_DIR": str(home / "tls"),
        "FEDPROBE_AGENT_BROKER_URL": f"amqps://{BROKER_NAME}:5671/fedprobe",
        # Published on loopback only.
        "FEDPROBE_HTTP_PORT": f"127.0.0.1:{free_port()}",
        "FEDPROBE_HTTPS_PORT": f"127.0.0.1:{free_port()}",
        "FEDPROBE_AMQPS_PORT": f"127.0.0.1:{free_port()}",
    }


# What the second site's .env holds (deploy/vantage-point.yml), for this test.
def _agent_settings(home: Path) -> dict[str, str]:
    return {
        "FEDPROBE_SERVER_CA_FILE": str(home / "tls" / "fullchain.pem"),
        # The lab's doors are on the loopback of the lab's network, which the agent shares.
        "FEDPROBE_EGRESS_ALLOW": "127.0.0.0/8,::1/128",
    }


@pytest.fixture(scope="module")
def stack(pytestconfig: pytest.Config) -> Iterator[Stack]:
    """The stack built from nothing and up (`up --wait`); afterwards down, and every
    container, volume, network and image it made removed, and its Docker engine stopped."""
    assert os.geteuid() == 0, "the compose stage runs as root (apt, dockerd), as CI does"
    say = _say(pytestconfig)
    home = new_home()
    daemon = DockerDaemon(home)
    (home / "empty.env").touch()
    stack = Stack(daemon, _settings(home), home / "empty.env", say)
    _tls_files(home / "tls")
    try:
        with stack.timed("apt (docker.io, debootstrap)"):
            apt_install_missing()
        with stack.timed("dockerd started"):
            daemon.start()
        with stack.timed(f"{BASE_IMAGE} from debootstrap"):
            base_image(daemon, home)
        with stack.timed(f"{PYTHON_IMAGE} stand-in"):
            python_image(daemon)
        with stack.timed("compose build"):
            stack.compose("build")
        with stack.timed("compose up --wait"):
            _up(stack)
        yield stack
    finally:
        try:
            if daemon.answers():
                _take_down(stack)
        finally:
            daemon.stop()
            remove_tree(home)


def _up(stack: Stack) -> None:
    """`up --wait`, then nginx answering HTTPS (it has no health check: `--wait` takes a
    container that starts and exits again for running); if either fails, what each service
    said last."""
    try:
        stack.compose("up", "--detach", "--wait", "--no-build", "--pull", "never")
        _wait_for("nginx answering", lambda: _answers(stack), NGINX_WAIT_S)
    except (StackError, AssertionError) as exc:
        states = stack.compose("ps", "--all")
        said = stack.compose("logs", "--no-color", "--tail", "20")
        raise StackError(f"{exc}\n{states}\n{said}") from None


def _answers(stack: Stack) -> bool:
    try:
        httpx.get(_base_url(stack), verify=_tls(stack), trust_env=False, timeout=5)
    except httpx.TransportError:
        return False
    return True


def _base_url(stack: Stack) -> str:
    return f"https://{HOST}:{stack.settings['FEDPROBE_HTTPS_PORT'].rsplit(':', 1)[1]}"


def _tls(stack: Stack) -> ssl.SSLContext:
    """Trusting nginx's certificate, and nothing else."""
    return ssl.create_default_context(
        cafile=Path(stack.settings["FEDPROBE_TLS_DIR"]) / "fullchain.pem"
    )


def _take_down(stack: Stack) -> None:
    daemon = stack.daemon
    with stack.timed("compose down and images removed"):
        try:
            stack.down()
        finally:
            # The rest of what was made: the base and the python stand-in, the images the
            # fedprobe services' builds left dangling (one per service), the build cache.
            daemon.docker("image", "prune", "--all", "--force")
            daemon.docker("builder", "prune", "--all", "--force")
    left = what_is_left(daemon)
    assert left == {"containers": [], "volumes": [], "images": [], "networks": []}


# -- the API through nginx --------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_key(stack: Stack) -> str:
    """An admin's API token, made as docs/deployment.md says (`manage.py apitoken`)."""
    stack.exec("web", "python", "manage.py", "createuser", "--role", "admin", "--no-password", USER)
    return stack.exec("web", "python", "manage.py", "apitoken", USER).strip()


@pytest.fixture(scope="module")
def api(stack: Stack, api_key: str) -> Iterator[httpx.Client]:
    """HTTPS to nginx's published port, verifying its certificate."""
    with httpx.Client(
        base_url=_base_url(stack),
        headers={"Authorization": f"Token {api_key}"},
        verify=_tls(stack),
        trust_env=False,
        timeout=30,
    ) as client:
        yield client


def _get(api: httpx.Client, path: str, **params: Any) -> Any:
    answer = api.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _endpoint(api: httpx.Client, name: str) -> dict[str, Any]:
    endpoints = _get(api, "/api/v1/endpoints/", page_size=100)["results"]
    found = [endpoint for endpoint in endpoints if endpoint["name"] == name]
    assert len(found) == 1, name
    endpoint: dict[str, Any] = found[0]
    return endpoint


def _wait_for(what: str, done: Callable[[], Any], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (result := done()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(2)
    return result


def _measure(
    stack: Stack, api: httpx.Client, vantage_point: str, methods: tuple[str, ...]
) -> list[dict[str, Any]]:
    """A campaign over the lab's token and proxy doors from `vantage_point`, read by
    `methods`, created and launched through the API; its runs once every one has ended."""
    doors = [_endpoint(api, TOKEN_DOOR), _endpoint(api, PROXY_DOOR)]
    files = [f["id"] for door in doors for f in door["files"] if f["path"] == TEST_FILE]
    places = _get(api, "/api/v1/vantage-points/")["results"]
    body = {
        "name": f"compose stack from {vantage_point}",
        "endpoints": [door["id"] for door in doors],
        "test_files": files,
        "vantage_points": [vp["id"] for vp in places if vp["name"] == vantage_point],
        "methods": list(methods),
        "patterns": ["sequential"],
        "read_sizes": [1024 * 1024],
        "fractions": [1.0],
        "clients": [1],
    }
    with stack.timed(f"campaign measured from {vantage_point}"):
        created = api.post("/api/v1/campaigns/", json=body)
        assert created.status_code == 201, created.text
        launched = api.post(f"/api/v1/campaigns/{created.json()['id']}/launch/")
        assert launched.status_code == 201, launched.text
        ids = set(launched.json()["runs"])
        assert len(ids) == len(doors) * len(methods)

        def ended() -> list[dict[str, Any]]:
            runs = _get(api, "/api/v1/runs/", campaign=created.json()["id"])["results"]
            mine = [run for run in runs if run["id"] in ids]
            return mine if all(run["status"] not in ("queued", "running") for run in mine) else []

        runs: list[dict[str, Any]] = _wait_for("the campaign's runs", ended, RUNS_WAIT_S)
    return runs


@pytest.fixture(scope="module")
def finished_runs(stack: Stack, api: httpx.Client) -> list[dict[str, Any]]:
    """The lab's doors read in place and copied first, from the deployment's own worker."""
    return _measure(stack, api, "local", METHODS)


@pytest.fixture(scope="module")
def enrolment_token(stack: Stack) -> str:
    """A one-time enrolment token for vantage point REMOTE (made by the command), as
    docs/vantage-points.md says."""
    return stack.exec("web", "python", "manage.py", "vantage", "enrol", REMOTE).strip()


@pytest.fixture(scope="module")
def agent(stack: Stack, enrolment_token: str) -> Iterator[Stack]:
    """The agent of vantage point REMOTE, as deploy/vantage-point.yml runs it: enrolled
    through nginx (the token on stdin), then up; afterwards down with its volume."""
    settings = _agent_settings(Path(stack.settings["FEDPROBE_TLS_DIR"]).parent)
    agent = Stack(
        stack.daemon, settings, stack.env_file, stack.say, project=AGENT_PROJECT, files=AGENT_FILES
    )
    enrol = ("python", "-m", "workers.agent", "enrol", f"https://{SERVER_NAME}", "-")
    try:
        with stack.timed("remote vantage point enrolled and up"):
            said = agent.compose(
                "run",
                "--rm",
                "-T",
                "agent",
                *enrol,
                "--ca-file",
                "/etc/fedprobe/server-ca.pem",
                stdin=f"{enrolment_token}\n",
            )
            assert f"enrolled as vantage point {REMOTE}" in said, said
            agent.compose("up", "--detach", "--wait", "--no-build", "--pull", "never")
        yield agent
    finally:
        # The image is the deployment's: the stack's own take-down removes it.
        agent.down(images=False)


@pytest.fixture(scope="module")
def remote_runs(
    stack: Stack, api: httpx.Client, agent: Stack, finished_runs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The lab's doors read in place from the remote vantage point, after the local
    campaign. The token door's credential is first made a WLCG token of the lab's issuer:
    for an OAuth client the server fetches the token when the agent claims the run
    (docs/vantage-points.md), and the lab's issuer listens on the lab container's loopback,
    which the web container does not share."""
    token = stack.exec("lab", "python", "manage.py", "lab", "token").strip()
    door = _endpoint(api, TOKEN_DOOR)
    changed = api.patch(
        f"/api/v1/endpoints/{door['id']}/", json={"credential_kind": "token", "credential": token}
    )
    assert changed.status_code == 200, changed.text
    return _measure(stack, api, REMOTE, ("direct",))


def test_a_campaign_launched_through_nginx_measures_the_lab_doors_direct_and_copied(
    api: httpx.Client, finished_runs: list[dict[str, Any]]
) -> None:
    """The worker measures in the lab's network with the lab's CA (shared by volume ca),
    its egress guard reading connect() addresses through /proc under Docker's seccomp
    profile: token and proxy doors, read in place and copied by xrdcp, all succeed."""
    failed = {
        (run["endpoint_name"], run["method"]): _get(api, f"/api/v1/runs/{run['id']}/")
        for run in finished_runs
        if run["status"] != "succeeded"
    }
    assert failed == {}
    seen = {(run["endpoint_name"], run["method"], run["auth"]) for run in finished_runs}
    assert seen == {
        (door, method, auth)
        for door, auth in ((TOKEN_DOOR, "token"), (PROXY_DOOR, "gsi"))
        for method in METHODS
    }
    assert all(run["bytes_read"] == 16 * 1024 * 1024 for run in finished_runs)


def test_a_remote_vantage_point_measures_with_sealed_credentials_and_no_central_secret(
    stack: Stack, api: httpx.Client, agent: Stack, remote_runs: list[dict[str, Any]]
) -> None:
    """The agent, enrolled through nginx and consuming its queue over RabbitMQ's TLS port
    with its own account, measures the token and proxy doors with the credentials sealed to
    it; its container holds none of the deployment's secrets."""
    failed = {
        run["endpoint_name"]: _why(_get(api, f"/api/v1/runs/{run['id']}/"))
        for run in remote_runs
        if run["status"] != "succeeded"
    }
    assert failed == {}, agent.logs()[-3000:]
    seen = {(run["endpoint_name"], run["vantage_point"], run["auth"]) for run in remote_runs}
    assert seen == {(TOKEN_DOOR, REMOTE, "token"), (PROXY_DOOR, REMOTE, "gsi")}
    environment = agent.exec("agent", "env")
    central = ("POSTGRES_PASSWORD", "RABBITMQ_PASSWORD", "FEDPROBE_SECRET_KEY")
    held = [
        name
        for name in (*central, "FEDPROBE_CREDENTIAL_KEY")
        if stack.settings[name] in environment
    ]
    assert held == []
    assert "DATABASE_URL" not in environment


def _why(run: dict[str, Any]) -> tuple[Any, ...]:
    """What a failed run's detail says of its failure, short enough for an assertion."""
    return run["status"], run.get("error_class"), json.dumps(run.get("errors"))[:600]


@pytest.mark.usefixtures("finished_runs", "remote_runs")
def test_no_secret_reaches_nginx_or_any_container_log(
    stack: Stack, api: httpx.Client, api_key: str, agent: Stack, enrolment_token: str
) -> None:
    """Clients put tokens in query strings and referers; nginx logs neither, gunicorn
    redacts them, and no credential the runs used (the lab's oauth client and tokens, its
    proxy) nor any key of the deployment is written by any container."""
    lab_token = stack.exec("lab", "python", "manage.py", "lab", "token").strip()
    assert JWT.match(lab_token)
    leaky = {"access_token": api_key, "authz": lab_token}
    referer = {"Referer": f"https://{HOST}/api/v1/?token={api_key}"}
    answer = api.get("/api/v1/campaigns/", params=leaky, headers=referer)
    assert answer.status_code == 200, answer.text
    credentials = _stored_credentials(stack)
    assert sum(PEM in text for text in credentials) > 0  # the proxy doors' proxies
    # The log looked at is nginx's access log, with the request (its path alone).
    nginx_log = stack.compose("logs", "--no-color", "nginx")
    request_logged = re.search(r'"GET /api/v1/campaigns/ HTTP/1\.1" 200 ', nginx_log) is not None
    assert request_logged
    # Failures name what leaked, never show it (nor the logs: they would hold it).
    logs = stack.logs() + agent.logs()
    secret_list = _secrets(stack, api_key, lab_token, credentials)
    secret_list["the enrolment token"] = enrolment_token
    leaked = sorted(name for name, value in secret_list.items() if value in logs)
    if JWT.search(logs):
        leaked.append("a JSON web token")
    if PEM in logs:
        leaked.append("a PEM block")
    assert leaked == [], f"in the containers' logs: {', '.join(leaked)}"


def _stored_credentials(stack: Stack) -> list[str]:
    """The endpoints' credentials, decrypted: what the runs used and no log may show."""
    shell = ("python", "manage.py", "shell", "--no-imports")
    output = stack.exec("web", *shell, stdin=READ_CREDENTIALS)
    try:
        stored = json.loads(output)
    except ValueError:
        pytest.fail("manage.py shell printed something else than the credentials", pytrace=False)
    return [text for text in stored if text]


def _secrets(stack: Stack, api_key: str, lab_token: str, credentials: list[str]) -> dict[str, str]:
    """Each secret by a name to report it by (never the secret itself)."""
    found = {"the API token": api_key, "a lab token": lab_token}
    for name in (
        "POSTGRES_PASSWORD",
        "RABBITMQ_PASSWORD",
        "FEDPROBE_SECRET_KEY",
        "FEDPROBE_CREDENTIAL_KEY",
        "FEDPROBE_METRICS_TOKEN",
    ):
        found[name] = stack.settings[name]
    for number, text in enumerate(credentials):
        try:
            client = json.loads(text)
        except ValueError:
            # A proxy: every line of its certificates and key long enough to be telling.
            lines = [line for line in text.splitlines() if len(line) >= 32]
            found |= {f"credential {number}, line {i}": line for i, line in enumerate(lines)}
        else:
            found[f"credential {number}'s client secret"] = client["client_secret"]
    return found
