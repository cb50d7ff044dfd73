"""`manage.py createuser USERNAME --role viewer|operator|admin [--email E]
[--password-stdin | --no-password]`: a new active user with that role.

A password is never an argument (argv is visible to every user of the host and lands in
shell histories): it is read from standard input, or typed twice at a prompt.
"""

from __future__ import annotations

import getpass
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import ROLES
from webapp.accounts.services import UserInputError, user_create

BAD_INPUT = 2


class Command(BaseCommand):
    help = (
        "Create USERNAME with a role. The password comes from standard input "
        "(--password-stdin), a prompt (on a terminal), or there is none (--no-password: the "
        "user signs in with single sign-on, or uses an API token)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--email", default="")
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            "--password-stdin",
            action="store_true",
            help="read the password from the first line of standard input",
        )
        source.add_argument(
            "--no-password",
            action="store_true",
            help="no password: single sign-on or an API token only",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        password = self._password(options)
        try:
            user = user_create(
                username=options["username"],
                role=options["role"],
                email=options["email"],
                password=password,
            )
        except UserInputError as refused:
            raise CommandError(str(refused), returncode=BAD_INPUT) from None
        how = "without a password" if password is None else "with a password"
        self.stdout.write(f"{user.get_username()} was created, {options['role']}, {how}")

    def _password(self, options: dict[str, Any]) -> str | None:
        if options["no_password"]:
            return None
        if options["password_stdin"]:
            password = sys.stdin.readline().rstrip("\r\n")
        elif sys.stdin.isatty():
            password = getpass.getpass("Password: ")
            if getpass.getpass("Password (again): ") != password:
                raise CommandError("password: the two passwords differ", returncode=BAD_INPUT)
        else:
            raise CommandError(
                "password: give --password-stdin (and the password on standard input) or "
                "--no-password",
                returncode=BAD_INPUT,
            )
        if not password:
            raise CommandError("password: it is empty", returncode=BAD_INPUT)
        return password
