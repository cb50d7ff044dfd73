"""docker-compose.yml, Dockerfile and deploy/: what can be checked without a Docker engine.

The files parse; every command they run exists and accepts its arguments; the environment
they set is what the settings read and passes `check --deploy`; the lab's foreground wrapper
really starts, registers and stops a lab.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.fernet import Fernet
from django.core.management import get_commands, load_command_class

REPO = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
DOCKERFILE = (REPO / "Dockerfile").read_text()
APP_SERVICES = ("migrate", "web", "worker", "beat", "lab")
DOT_ENV = {
    "POSTGRES_PASSWORD": "pg-password",
    "RABBITMQ_PASSWORD": "mq-password",
    "FEDPROBE_SECRET_KEY": secrets.token_urlsafe(50),
    "FEDPROBE_CREDENTIAL_KEY": Fernet.generate_key().decode(),
    "FEDPROBE_ALLOWED_HOSTS": "fedprobe.example.org",
    "FEDPROBE_METRICS_TOKEN": secrets.token_urlsafe(32),
    "GRAFANA_DB_PASSWORD": "grafana-db-password",
    "GRAFANA_ADMIN_PASSWORD": "grafana-admin-password",
}


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR:?error} and $$, enough for our file."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, argument = match.group("name", "op", "arg")
        value = env.get(name, "")
        if operator == ":?" and not value:
            raise KeyError(f"{name}: {argument}")
        return value or (argument if operator == ":-" else "")

    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:-|:\?)(?P<arg>[^}]*))?\}", substitute, text)


def service_env(service: str, env: Mapping[str, str] = DOT_ENV) -> dict[str, str]:
    return {k: interpolate(str(v), env) for k, v in SERVICES[service]["environment"].items()}


def command(service: str) -> list[str]:
    return [interpolate(str(arg), {}) for arg in SERVICES[service]["command"]]


def dockerfile_env() -> dict[str, str]:
    block = re.search(r"^ENV (.*?)\n\n", DOCKERFILE, re.MULTILINE | re.DOTALL)
    assert block
    pairs = shlex.split(block.group(1).replace("\\\n", " "))
    return dict(pair.split("=", 1) for pair in pairs)


def run_in_image_env(
    argv: list[str], service: str, extra: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run argv here with the environment the service's container would have."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("FEDPROBE_")
        and name not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL"}
    }
    image_env = dockerfile_env()
    # Paths of the image that do not exist here: keep this machine's defaults.
    for name in ("FEDPROBE_VAR_DIR", "FEDPROBE_STATIC_ROOT", "FEDPROBE_LAB_DIR", "PYTHONPATH"):
        image_env.pop(name)
    compose_env = service_env(service)
    compose_env.pop("FEDPROBE_CA_DIR", None)  # a volume of the containers
    env.update(image_env, **compose_env, **(extra or {}))
    return subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def settings_source() -> str:
    return (REPO / "webapp" / "settings.py").read_text()


# -- compose file ----------------------------------------------------------------------------


def test_compose_runs_the_whole_application() -> None:
    assert set(SERVICES) == {
        "postgres", "rabbitmq", "redis", "migrate", "web", "nginx", "worker", "beat", "lab",
        "prometheus", "grafana-reader", "grafana",
    }  # fmt: skip
    assert SERVICES["postgres"]["image"].startswith("postgres:16")


def test_application_services_run_the_image_built_from_the_dockerfile() -> None:
    for service in APP_SERVICES:
        assert SERVICES[service]["build"] == ".", service
    assert len({SERVICES[service]["image"] for service in APP_SERVICES}) == 1


def test_databases_and_long_running_services_have_health_checks() -> None:
    assert SERVICES["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert SERVICES["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert SERVICES["rabbitmq"]["healthcheck"]["test"] == [
        "CMD",
        "rabbitmq-diagnostics",
        "-q",
        "ping",
    ]
    for service in ("web", "worker", "lab"):
        assert "healthcheck" in SERVICES[service], service


def test_state_lives_in_volumes() -> None:
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "redisdata:/data" in SERVICES["redis"]["volumes"]
    assert "rabbitmqdata:/var/lib/rabbitmq" in SERVICES["rabbitmq"]["volumes"]
    assert set(COMPOSE["volumes"]) == {
        "pgdata", "rabbitmqdata", "redisdata", "static", "lab", "ca", "prometheusdata",
        "grafanadata",
    }  # fmt: skip
    assert "prometheusdata:/prometheus" in SERVICES["prometheus"]["volumes"]
    assert "grafanadata:/var/lib/grafana" in SERVICES["grafana"]["volumes"]


def test_nothing_starts_before_the_database_is_migrated() -> None:
    for service in ("web", "worker", "beat", "lab"):
        depends = SERVICES[service]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, service
    assert SERVICES["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_only_the_lab_runs_as_root() -> None:
    assert re.search(r"^USER fedprobe$", DOCKERFILE, re.MULTILINE)
    assert [name for name, service in SERVICES.items() if service.get("user") == "root"] == ["lab"]


def test_worker_measures_from_the_lab_network_and_reads_its_files() -> None:
    worker = SERVICES["worker"]
    assert worker["network_mode"] == "service:lab"
    lab_dir = dockerfile_env()["FEDPROBE_LAB_DIR"]
    assert f"lab:{lab_dir}" in SERVICES["lab"]["volumes"]
    assert f"lab:{lab_dir}:ro" in worker["volumes"]


def test_the_ca_folder_lab_register_writes_is_the_one_worker_and_web_verify_against() -> None:
    """`lab register` writes VAR_DIR/ca in the lab's container; volume ca shares it."""
    ca_dir = f"{dockerfile_env()['FEDPROBE_VAR_DIR']}/ca"
    assert f"ca:{ca_dir}" in SERVICES["lab"]["volumes"]
    for service in ("worker", "web"):
        assert f"ca:{ca_dir}:ro" in SERVICES[service]["volumes"], service
        assert service_env(service)["FEDPROBE_CA_DIR"] == ca_dir, service


def test_nginx_logs_no_query_string_and_runs_on_nginx_1_22() -> None:
    """Each server {} names its access log, in the format without query strings: that
    replaces the image's http-level one (format `main`, with $request). `http2 on;` is
    nginx 1.25's; 1.22 refuses it (`listen ... http2` works on both)."""
    nginx = re.sub(r"#.*", "", (REPO / "deploy" / "nginx.conf").read_text())
    servers = re.split(r"^server \{", nginx, flags=re.MULTILINE)
    assert "access_log" not in servers[0]  # the http level, beside the image's
    for server in servers[1:]:
        assert "access_log /var/log/nginx/access.log fedprobe;" in server
    log_format = re.search(r"log_format fedprobe (.*?);", nginx, re.DOTALL)
    assert log_format
    assert not re.search(r"\$(request|args|query_string|request_uri|http_referer)\b", log_format[1])
    assert "http2 on" not in nginx
    assert "listen 443 ssl http2 default_server;" in nginx


def test_the_sign_in_callbacks_query_string_reaches_no_nginx_log() -> None:
    """The provider's code and state come in the callback's query string, and nginx's error
    log quotes a failed request's line whole: that location logs only what is critical. Its
    path is Django's, whatever the URLconf says."""
    from django.urls import reverse

    callback = reverse("oidc-callback")
    nginx = re.sub(r"#.*", "", (REPO / "deploy" / "nginx.conf").read_text())
    location = re.search(rf"location {re.escape(callback)} \{{(.*?)\}}", nginx, re.DOTALL)
    assert location is not None, f"no location {callback} in nginx.conf"
    assert "error_log /var/log/nginx/error.log crit;" in location.group(1)
    assert "proxy_pass http://web:8000;" in location.group(1)


def test_collected_static_files_are_what_nginx_serves() -> None:
    static_root = dockerfile_env()["FEDPROBE_STATIC_ROOT"]
    assert f"static:{static_root}" in SERVICES["migrate"]["volumes"]
    assert "collectstatic" in " ".join(command("migrate"))
    assert "static:/srv/static:ro" in SERVICES["nginx"]["volumes"]
    nginx = (REPO / "deploy" / "nginx.conf").read_text()
    assert "alias /srv/static/;" in nginx
    assert "proxy_pass http://web:8000;" in nginx
    # Django trusts this header in production: nginx must set it, never pass the client's.
    assert "proxy_set_header X-Forwarded-Proto https;" in nginx


def test_environment_names_are_the_ones_the_settings_read() -> None:
    source = settings_source()
    python = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPATH"}
    names = set(service_env("web")) | (set(dockerfile_env()) - python - {"DJANGO_SETTINGS_MODULE"})
    unread = sorted(name for name in names if f'"{name}"' not in source)
    assert unread == []


def test_every_required_production_setting_is_set_from_the_environment() -> None:
    env = service_env("web")
    required = ["DATABASE_URL", "FEDPROBE_BROKER_URL", "FEDPROBE_SECRET_KEY"]
    required += ["FEDPROBE_ALLOWED_HOSTS", "FEDPROBE_CREDENTIAL_KEY", "FEDPROBE_PRODUCTION"]
    required += ["FEDPROBE_METRICS_TOKEN"]
    for name in required:
        assert env[name], name
    assert env["FEDPROBE_PRODUCTION"] == "true"
    with pytest.raises(KeyError, match="FEDPROBE_SECRET_KEY"):
        service_env("web", {k: v for k, v in DOT_ENV.items() if k != "FEDPROBE_SECRET_KEY"})


def test_deploy_check_passes_with_the_compose_environment() -> None:
    argv = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    result = run_in_image_env(argv, "web")
    assert result.returncode == 0, result.stdout + result.stderr


# -- commands the services run ---------------------------------------------------------------


def manage_commands() -> Iterator[list[str]]:
    """Every `python manage.py ...` the services and deploy/lab-foreground run."""
    texts = [" ".join(command(service)) for service in SERVICES if "command" in SERVICES[service]]
    texts += (REPO / "deploy" / "lab-foreground").read_text().splitlines()
    for text in texts:
        for match in re.finditer(r"manage\.py ([^&|;]+)", text):
            yield shlex.split(match.group(1).replace('"$@"', ""))


def test_every_manage_py_command_exists_and_accepts_its_arguments() -> None:
    found = list(manage_commands())
    assert {argv[0] for argv in found} >= {"migrate", "collectstatic", "lab"}
    commands = get_commands()
    for argv in found:
        name, *args = argv
        assert name in commands, name
        parser = load_command_class(commands[name], name).create_parser("manage.py", name)
        parser.parse_args(args)


def test_celery_commands_accept_their_options() -> None:
    for service in ("worker", "beat"):
        argv = command(service)
        assert argv[:3] == ["celery", "-A", "webapp"]
        result = run_in_image_env([sys.executable, "-m", "celery", *argv[1:], "--help"], service)
        assert result.returncode == 0, result.stderr
    assert "vantage.local,control,notify" in command("worker")


def test_worker_health_check_command_accepts_its_options() -> None:
    test = interpolate(SERVICES["worker"]["healthcheck"]["test"][1], {})
    argv = shlex.split(test.replace("$(hostname)", "host"))
    assert argv[:3] == ["celery", "-A", "webapp"]
    result = run_in_image_env([sys.executable, "-m", "celery", *argv[1:], "--help"], "worker")
    assert result.returncode == 0, result.stderr


def test_gunicorn_loads_the_wsgi_application() -> None:
    argv = command("web")
    assert argv[:2] == ["gunicorn", "webapp.wsgi"]
    gunicorn = Path(sys.executable).parent / "gunicorn"
    result = run_in_image_env([str(gunicorn), *argv[1:], "--check-config"], "web")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_remote_vantage_point_runs_the_agent_holding_none_of_the_deployments_secrets() -> None:
    """deploy/vantage-point.yml, a second site's file (docs/vantage-points.md): the agent's
    command exists, its folder is a volume the image's user owns, and nothing of the
    deployment's is named in it (the compose stage runs it for real)."""
    text = (REPO / "deploy" / "vantage-point.yml").read_text()
    agent = yaml.safe_load(text)["services"]["agent"]
    argv = agent["command"]
    assert argv == ["python", "-m", "workers.agent", "run"]
    result = subprocess.run(
        [sys.executable, *argv[1:], "--help"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "agent:/var/lib/fedprobe/agent" in agent["volumes"]
    assert agent["environment"]["FEDPROBE_AGENT_DIR"] == "/var/lib/fedprobe/agent"
    assert re.search(r"mkdir -p [^\n]*/var/lib/fedprobe/agent", DOCKERFILE)
    central = [name for name in (*DOT_ENV, "DATABASE_URL", "FEDPROBE_BROKER_URL") if name in text]
    assert central == []


def test_the_broker_serves_remote_vantage_points_over_tls_only() -> None:
    """Plain AMQP stays on the stack's network (not published); the published port is the
    TLS listener deploy/rabbitmq.conf configures, with the deployment's certificate."""
    rabbitmq = SERVICES["rabbitmq"]
    assert [interpolate(port, {}) for port in rabbitmq["ports"]] == ["5671:5671"]
    config = dict(
        line.split(" = ", 1)
        for line in (REPO / "deploy" / "rabbitmq.conf").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert config["listeners.ssl.default"] == "5671"
    assert config["ssl_options.certfile"] == "/etc/rabbitmq/tls/fullchain.pem"
    assert "./deploy/rabbitmq.conf:/etc/rabbitmq/conf.d/20-fedprobe.conf:ro" in rabbitmq["volumes"]
    for name in ("FEDPROBE_BROKER_URL", "FEDPROBE_BROKER_ADMIN_URL"):
        assert "@rabbitmq:" in service_env("web")[name], name


def test_lab_health_check_is_the_lab_status_command() -> None:
    assert SERVICES["lab"]["healthcheck"]["test"] == [
        "CMD", "python", "-m", "workers.lab", "status"
    ]  # fmt: skip


# -- Dockerfile ------------------------------------------------------------------------------


def test_dockerfile_builds_on_debian_12_python_3_11() -> None:
    assert DOCKERFILE.count("\nFROM ") + DOCKERFILE.startswith("FROM ") == 1
    assert re.search(r"^FROM python:3\.11-slim-bookworm$", DOCKERFILE, re.MULTILINE)


def test_dockerfile_installs_the_debian_packages_of_bin_setup() -> None:
    setup = (REPO / "bin" / "setup").read_text()
    listed = re.search(r"APT_PACKAGES=\((.*?)\)", setup, re.DOTALL)
    assert listed
    install = re.search(r"apt-get install[^\n]*\\\n(.*?)&&", DOCKERFILE, re.DOTALL)
    assert install
    assert set(install.group(1).replace("\\", " ").split()) == set(listed.group(1).split())


def test_dockerfile_installs_the_project_pinned_by_the_lock() -> None:
    assert "pip install --no-cache-dir -c requirements.lock ." in DOCKERFILE


def test_dockerfile_copies_only_what_exists() -> None:
    for sources in re.findall(r"^COPY (.+) \S+$", DOCKERFILE, re.MULTILINE):
        for source in sources.split():
            assert (REPO / source).exists(), source


def test_lab_foreground_is_an_executable_shell_script() -> None:
    script = REPO / "deploy" / "lab-foreground"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0


# -- the lab's foreground wrapper, for real -------------------------------------------------


@pytest.fixture
def lab_foreground(transactional_db: None) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    from django.db import connection

    from workers.lab import Lab
    from workers.lab.ports import free_base_port

    db = connection.settings_dict
    state_dir = Path(tempfile.mkdtemp(prefix="fedprobe-fg-lab-", dir="/tmp"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FEDPROBE_")},
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "FEDPROBE_LAB_DIR": str(state_dir),
        "PYTHON": sys.executable,
    }
    argv = ["deploy/lab-foreground", "--base-port", str(free_base_port()), "--file-size", "1M"]
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield process, state_dir
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        Lab(state_dir).down()
        subprocess.run(["rm", "-rf", str(state_dir)], check=False)


def wait_for_registered_endpoints(process: subprocess.Popen[str], timeout_s: float = 120) -> None:
    from webapp.sites.models import Endpoint

    deadline = time.monotonic() + timeout_s
    while not Endpoint.objects.exists():
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "the lab was not registered in time"
        time.sleep(0.5)


@pytest.mark.lab
def test_lab_foreground_registers_the_lab_and_stops_it_on_sigterm(
    lab_foreground: tuple[subprocess.Popen[str], Path],
) -> None:
    from workers.lab import Lab

    process, state_dir = lab_foreground
    wait_for_registered_endpoints(process)
    assert Lab(state_dir).is_running()
    time.sleep(1)  # still in the foreground
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert Lab(state_dir).running_processes() == {}


@pytest.mark.lab
@pytest.mark.faults
def test_lab_foreground_exits_1_and_stops_the_rest_when_a_server_dies(
    lab_foreground: tuple[subprocess.Popen[str], Path],
) -> None:
    from workers.lab import Lab

    process, state_dir = lab_foreground
    wait_for_registered_endpoints(process)
    lab = Lab(state_dir)
    name, pid = sorted(lab.running_processes().items())[0]
    os.kill(pid, signal.SIGKILL)
    assert process.wait(timeout=60) == 1, name
    assert lab.running_processes() == {}
