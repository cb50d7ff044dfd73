"""Access logs hide secrets in query strings and referers: runserver's (bin/run) and
gunicorn's (docker-compose.yml), each as a real server process answering a real request."""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_deployment import DOCKERFILE, REPO, command, dockerfile_env, service_env
from webapp.core.access_log import redact_atom

SECRETS = ("tok3n-abcdef", "cl1ent-s3cret", "r3fresh-xyz", "ref-t0ken-123", "ss0-c0de", "st4te-9")
# The single sign-on's answer comes back as ?code=...&state=... (the OIDC callback).
QUERY = (
    f"token={SECRETS[0]}&client_secret={SECRETS[1]}&refresh_token={SECRETS[2]}&page=2"
    f"&code={SECRETS[4]}&state={SECRETS[5]}"
)
REFERER = f"https://fedprobe.example.org/runs/?access_token={SECRETS[3]}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("FEDPROBE_")
        and name not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL"}
    }
    return {**env, **extra}


def serve_one_request(argv: list[str], env: dict[str, str], port: int, log: Path) -> str:
    """Start the server, send it one request carrying secrets, stop it; its output."""
    with log.open("wb") as out:
        server = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except OSError:
                    assert server.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
            # Any answer is logged: a redirect to https, a 400 for the host, a 503.
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request(
                "GET",
                f"/healthz?{QUERY}",
                headers={"Host": "fedprobe.example.org", "Referer": REFERER},
            )
            connection.getresponse().read()
            connection.close()
            time.sleep(1)  # the access line is written after the answer
        finally:
            server.terminate()
            server.wait(30)
    return log.read_text()


def assert_redacted(output: str) -> None:
    assert "/healthz?token=[redacted]&client_secret=[redacted]" in output, output
    assert "refresh_token=[redacted]&page=2&code=[redacted]&state=[redacted]" in output, output
    for secret in (*SECRETS[:3], *SECRETS[4:]):
        assert secret not in output, output


def test_runserver_access_log_hides_query_secrets(tmp_path: Path) -> None:
    port = free_port()
    # bin/run's web server, with the embedded defaults (SQLite in VAR_DIR).
    argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    env = clean_env(FEDPROBE_VAR_DIR=str(tmp_path / "var"))
    assert_redacted(serve_one_request(argv, env, port, tmp_path / "web.log"))


def test_gunicorn_access_log_of_compose_hides_query_and_referer_secrets(tmp_path: Path) -> None:
    port = free_port()
    argv = command("web")
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{port}"
    argv[argv.index("--workers") + 1] = "1"
    argv[0] = str(Path(sys.executable).parent / "gunicorn")
    image_env = dockerfile_env()
    for name in ("FEDPROBE_VAR_DIR", "FEDPROBE_STATIC_ROOT", "FEDPROBE_LAB_DIR", "PYTHONPATH"):
        image_env.pop(name)
    compose_env = service_env("web")
    compose_env.pop("FEDPROBE_CA_DIR", None)  # a volume of the containers, not a folder here
    env = clean_env(**image_env, **compose_env)
    output = serve_one_request(argv, env, port, tmp_path / "gunicorn.log")
    assert_redacted(output)
    assert "access_token=[redacted]" in output
    assert SECRETS[3] not in output


def test_dockerfile_runs_gunicorn_with_the_redacting_logger() -> None:
    compose = command("web")
    logger = compose[compose.index("--logger-class") + 1]
    assert logger == "webapp.core.access_log.RedactingLogger"
    assert f'"--logger-class", "{logger}"' in DOCKERFILE


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("q", "authz=abc&x=1", "authz=[redacted]&x=1"),
        ("{query_string}e", "api_key=k&page=2", "api_key=[redacted]&page=2"),
        ("r", "GET /f?sig=abc HTTP/1.1", "GET /f?sig=[redacted] HTTP/1.1"),
        ("{authorization}i", "Token 9944b09199c62bcf9418ad84", "Token [redacted]"),
        ("s", 200, 200),
    ],
)
def test_access_log_fields_are_redacted(name: str, value: object, expected: object) -> None:
    assert redact_atom(name, value) == expected


def test_nginx_access_log_leaves_out_query_strings_and_referers() -> None:
    nginx = (REPO / "deploy" / "nginx.conf").read_text()
    log_format = re.search(r"^log_format fedprobe (.*?);$", nginx, re.MULTILINE | re.DOTALL)
    assert log_format
    for variable in ("$request ", '$request"', "$request_uri", "$args", "$query_string"):
        assert variable not in log_format.group(1), variable
    assert "$http_referer" not in log_format.group(1)
    # Each server {} names it (replacing the image's own http-level access_log, whose
    # format holds $request): one per server, and no other.
    assert re.findall(r"^\s*access_log\s+([^;]*);", nginx, re.MULTILINE) == [
        "/var/log/nginx/access.log fedprobe"
    ] * len(re.findall(r"^server \{", nginx, re.MULTILINE))
