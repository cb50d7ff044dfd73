"""Single sign-on configured by the environment, read in fresh processes as a deployment
starts them: off unless FEDPROBE_OIDC_ISSUER is set, and a bad value stops the start."""

from __future__ import annotations

import json
from pathlib import Path

from tests.webapp.test_production_settings import run_django

SECRET = "client-secret-from-a-file-7f3a"
NAMES = (
    "FEDPROBE_OIDC_ISSUER",
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "FEDPROBE_OIDC_ROLE_MAP",
    "FEDPROBE_OIDC_DEFAULT_ROLE",
    "FEDPROBE_OIDC_NAME",
)


def read_settings(env: dict[str, str]) -> dict[str, object]:
    code = (
        "import django, json; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {list(NAMES)!r}}}))"
    )
    result = run_django(["-c", code], env)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def start_error(env: dict[str, str]) -> str:
    result = run_django(["-c", "import django; django.setup()"], env)
    assert result.returncode != 0
    return result.stderr.strip().splitlines()[-1]


def test_single_sign_on_is_off_by_default() -> None:
    assert read_settings({})["FEDPROBE_OIDC_ISSUER"] == ""


def test_single_sign_on_from_the_environment(tmp_path: Path) -> None:
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(SECRET + "\n")
    configured = read_settings(
        {
            "FEDPROBE_OIDC_ISSUER": "https://cms-auth.web.cern.ch/",
            "FEDPROBE_OIDC_NAME": "CMS IAM",
            "FEDPROBE_OIDC_CLIENT_ID": "fedprobe",
            "FEDPROBE_OIDC_CLIENT_SECRET_FILE": str(secret_file),
            "FEDPROBE_OIDC_ROLE_MAP": "/cms/fedprobe/admins=admin, /cms/fedprobe=operator",
            "FEDPROBE_OIDC_DEFAULT_ROLE": "none",
        }
    )
    assert configured == {
        "FEDPROBE_OIDC_ISSUER": "https://cms-auth.web.cern.ch",
        "OIDC_RP_CLIENT_ID": "fedprobe",
        "OIDC_RP_CLIENT_SECRET": SECRET,
        "FEDPROBE_OIDC_ROLE_MAP": {"/cms/fedprobe/admins": "admin", "/cms/fedprobe": "operator"},
        "FEDPROBE_OIDC_DEFAULT_ROLE": "none",
        "FEDPROBE_OIDC_NAME": "CMS IAM",
    }


def test_bad_single_sign_on_settings_stop_the_start_naming_the_variable(tmp_path: Path) -> None:
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(SECRET)
    good = {
        "FEDPROBE_OIDC_ISSUER": "https://auth.cern.ch/auth/realms/cern",
        "FEDPROBE_OIDC_CLIENT_ID": "fedprobe",
        "FEDPROBE_OIDC_CLIENT_SECRET_FILE": str(secret_file),
    }
    assert read_settings(good)["OIDC_RP_CLIENT_SECRET"] == SECRET
    cases = {
        "FEDPROBE_OIDC_ISSUER": ("http://auth.example.org", "is not an https:// URL"),
        "FEDPROBE_OIDC_CLIENT_ID": ("", "FEDPROBE_OIDC_CLIENT_ID must be set"),
        "FEDPROBE_OIDC_CLIENT_SECRET_FILE": (str(tmp_path / "nope"), "cannot read it"),
        "FEDPROBE_OIDC_ROLE_MAP": ("admins=boss", "'admins=boss' is not GROUP=ROLE"),
        "FEDPROBE_OIDC_DEFAULT_ROLE": ("guest", "'guest' is not one of"),
    }
    for name, (value, error) in cases.items():
        message = start_error({**good, name: value})
        assert name in message and error in message, message
    (tmp_path / "empty").write_text("\n")
    message = start_error({**good, "FEDPROBE_OIDC_CLIENT_SECRET_FILE": str(tmp_path / "empty")})
    assert "FEDPROBE_OIDC_CLIENT_SECRET_FILE: the file is empty" in message
