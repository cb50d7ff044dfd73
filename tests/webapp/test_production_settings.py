"""webapp.settings read from the environment, in fresh processes as a deployment starts them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

BASE_DIR = Path(__file__).resolve().parents[2]
SECRET_KEY = secrets.token_urlsafe(50)
CREDENTIAL_KEY = Fernet.generate_key().decode()
PRODUCTION_ENV = {
    "FEDPROBE_PRODUCTION": "true",
    "FEDPROBE_SECRET_KEY": SECRET_KEY,
    "FEDPROBE_ALLOWED_HOSTS": "fedprobe.example.org",
    "FEDPROBE_CREDENTIAL_KEY": CREDENTIAL_KEY,
    "FEDPROBE_BROKER_URL": "redis://redis:6379/0",
    "FEDPROBE_CACHE_URL": "redis://redis:6379/1",
    "FEDPROBE_NUM_PROXIES": "1",
}


def run_django(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run python with `args` in a clean environment: only `env` sets FEDPROBE_* variables."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("FEDPROBE_") and name != "DJANGO_SETTINGS_MODULE"
    }
    clean.update(env, DJANGO_SETTINGS_MODULE="webapp.settings")
    return subprocess.run(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def production_setting(*names: str, env: dict[str, str] = PRODUCTION_ENV) -> dict[str, object]:
    code = (
        "import django, json; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n, None) for n in {list(names)!r}}}))"
    )
    result = run_django(["-c", code], env)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_deploy_check_passes_with_production_settings_from_the_environment() -> None:
    result = run_django(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION_ENV
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_deploy_check_fails_with_the_local_defaults() -> None:
    result = run_django(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], {})
    assert result.returncode != 0
    assert "security.W004" in result.stderr  # no HSTS


def test_production_turns_on_https_only_cookies_hsts_and_the_proxy_header() -> None:
    assert production_setting(
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        "DEBUG",
    ) == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 365 * 24 * 3600,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "DEBUG": False,
    }


def test_production_reads_hosts_keys_cache_and_proxies_from_the_environment() -> None:
    got = production_setting("ALLOWED_HOSTS", "FEDPROBE_CREDENTIAL_KEYS", "CACHES")
    assert got["ALLOWED_HOSTS"] == ["fedprobe.example.org"]
    assert got["FEDPROBE_CREDENTIAL_KEYS"] == [CREDENTIAL_KEY]
    assert got["CACHES"] == {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://redis:6379/1",
        }
    }


def test_local_mode_trusts_no_proxy_header() -> None:
    got = production_setting("SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", env={})
    assert got == {"SECURE_PROXY_SSL_HEADER": None, "SECURE_SSL_REDIRECT": False}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"FEDPROBE_PRODUCTION": "maybe"}, "FEDPROBE_PRODUCTION='maybe' is not a boolean"),
        ({"FEDPROBE_SECRET_KEY": ""}, "FEDPROBE_SECRET_KEY must be set"),
        ({"FEDPROBE_SECRET_KEY": "short-secret-key"}, "FEDPROBE_SECRET_KEY is too weak"),
        ({"FEDPROBE_SECRET_KEY": "a" * 60}, "FEDPROBE_SECRET_KEY is too weak"),
        ({"FEDPROBE_ALLOWED_HOSTS": ""}, "FEDPROBE_ALLOWED_HOSTS must be set"),
        ({"FEDPROBE_CREDENTIAL_KEY": ""}, "FEDPROBE_CREDENTIAL_KEY must be set"),
        ({"FEDPROBE_CREDENTIAL_KEY": "hunter2-not-a-key"}, "FEDPROBE_CREDENTIAL_KEY: key 1 is"),
        (
            {"FEDPROBE_CREDENTIAL_KEY": f"{CREDENTIAL_KEY},hunter2"},
            "FEDPROBE_CREDENTIAL_KEY: key 2 is",
        ),
        ({"FEDPROBE_DEBUG": "true"}, "FEDPROBE_DEBUG=true is not allowed"),
        ({"FEDPROBE_HSTS_SECONDS": "a year"}, "FEDPROBE_HSTS_SECONDS='a year' is not a whole"),
        ({"FEDPROBE_HSTS_PRELOAD": "sure"}, "FEDPROBE_HSTS_PRELOAD='sure' is not a boolean"),
        ({"FEDPROBE_THROTTLE_LOGIN": "lots"}, "FEDPROBE_THROTTLE_LOGIN='lots' is not a rate"),
        ({"FEDPROBE_THROTTLE_WRITES": "0/min"}, "FEDPROBE_THROTTLE_WRITES='0/min' is not a"),
        ({"FEDPROBE_NUM_PROXIES": "one"}, "FEDPROBE_NUM_PROXIES='one' is not a whole number"),
        ({"FEDPROBE_LOG_LEVEL": "LOUD"}, "FEDPROBE_LOG_LEVEL='LOUD' is not one of"),
        ({"FEDPROBE_CACHE_URL": "memcached://cache:11211"}, "FEDPROBE_CACHE_URL must be a"),
        ({"FEDPROBE_METRICS_TOKEN": "scrape-me-short"}, "FEDPROBE_METRICS_TOKEN is too weak"),
        ({"FEDPROBE_METRICS_ALLOW": "10.0.0.0/33"}, "FEDPROBE_METRICS_ALLOW: "),
        ({"FEDPROBE_METRICS_SERIES_METRICS": "speed"}, "FEDPROBE_METRICS_SERIES_METRICS names"),
    ],
)
def test_malformed_environment_fails_at_start_naming_the_variable(
    changes: dict[str, str], message: str
) -> None:
    env = {**PRODUCTION_ENV, **changes}
    result = run_django(["manage.py", "check"], {k: v for k, v in env.items() if v})
    assert result.returncode != 0
    assert message in result.stderr
    assert "ImproperlyConfigured" in result.stderr


@pytest.mark.parametrize(
    "changes",
    [
        {"FEDPROBE_SECRET_KEY": "hunter2-short"},
        {"FEDPROBE_CREDENTIAL_KEY": "hunter2-not-a-fernet-key"},
    ],
)
def test_rejected_secret_is_not_echoed(changes: dict[str, str]) -> None:
    result = run_django(["manage.py", "check"], {**PRODUCTION_ENV, **changes})
    assert result.returncode != 0
    assert "hunter2" not in result.stderr


def test_log_lines_have_secrets_redacted() -> None:
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('webapp.probe').error("
        "'open %s failed', 'root://alice:hunter2@se.example.org//f?authz=tok3n')"
    )
    result = run_django(["-c", code], {})
    assert result.returncode == 0, result.stderr
    assert "open root://alice:[redacted]@se.example.org//f?authz=[redacted] failed" in (
        result.stderr
    )
    assert "hunter2" not in result.stderr
    assert "tok3n" not in result.stderr
