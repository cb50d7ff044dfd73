"""`manage.py createuser USERNAME --role R [--email E] [--password-stdin | --no-password]`."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.accounts.roles import user_role

pytestmark = pytest.mark.django_db
BASE_DIR = Path(__file__).resolve().parents[3]


class Stdin(io.StringIO):
    def __init__(self, text: str, *, tty: bool = False) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def createuser(*args: str, stdin: str = "", monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "stdin", Stdin(stdin))
    out = io.StringIO()
    call_command("createuser", *args, stdout=out)
    return out.getvalue()


def test_createuser_reads_the_password_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    printed = createuser(
        "alice",
        "--role",
        "operator",
        "--email",
        "alice@example.org",
        "--password-stdin",
        stdin="a long pass phrase 1\n",
        monkeypatch=monkeypatch,
    )
    assert printed == "alice was created, operator, with a password\n"
    alice = authenticate(username="alice", password="a long pass phrase 1")
    assert alice is not None
    assert (user_role(alice), alice.email) == ("operator", "alice@example.org")


def test_createuser_without_a_password_makes_an_sso_only_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    printed = createuser("bob", "--role", "viewer", "--no-password", monkeypatch=monkeypatch)
    assert printed == "bob was created, viewer, without a password\n"
    bob = User.objects.get(username="bob")
    assert not bob.has_usable_password() and user_role(bob) == "viewer"


def test_createuser_prompts_twice_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    typed = iter(["a long pass phrase 1", "a long pass phrase 1"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(typed))
    monkeypatch.setattr(sys, "stdin", Stdin("", tty=True))
    call_command("createuser", "carol", "--role", "admin", stdout=io.StringIO())
    assert authenticate(username="carol", password="a long pass phrase 1") is not None


@pytest.mark.parametrize(
    ("args", "stdin", "error"),
    [
        (["alice", "--role", "viewer"], "", "password: give --password-stdin"),
        (["alice", "--role", "viewer", "--password-stdin"], "\n", "password: it is empty"),
        (["alice", "--role", "viewer", "--password-stdin"], "alice\n", "password: "),
        (["al ice", "--role", "viewer", "--no-password"], "", "username: 'al ice' may hold"),
        (["alice", "--role", "viewer", "--email", "x@", "--no-password"], "", "email: 'x@'"),
        (["Taken", "--role", "viewer", "--no-password"], "", "username: a user named 'Taken'"),
    ],
)
def test_createuser_refuses_bad_input_with_status_2_and_creates_nothing(
    monkeypatch: pytest.MonkeyPatch, args: list[str], stdin: str, error: str
) -> None:
    User.objects.create_user("taken")
    with pytest.raises(CommandError, match=error) as refused:
        createuser(*args, stdin=stdin, monkeypatch=monkeypatch)
    assert refused.value.returncode == 2
    assert list(User.objects.values_list("username", flat=True)) == ["taken"]


def test_createuser_takes_no_password_argument_and_exits_2_on_bad_arguments() -> None:
    for args in (
        ["alice", "--role", "viewer", "--password", "secret"],
        ["alice", "--role", "boss", "--no-password"],
        ["alice", "--role", "viewer", "--no-password", "--password-stdin"],
    ):
        result = subprocess.run(
            [sys.executable, "manage.py", "createuser", *args],
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2, (args, result.stderr)
        assert "error:" in result.stderr
