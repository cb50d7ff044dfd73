"""`manage.py apitoken USERNAME [--rotate | --keep FILE]`: make the user's API token and print
its key.

Only the key's digest is stored, so a key is printed once, when it is made: for a user who
has a token already, --rotate makes a new one (and the old one stops working). --keep FILE
is for `bin/run`, which shows the embedded admin's token at every start: the key kept in
FILE (0600) while it is still the user's token, else a new one written there.
"""

from __future__ import annotations

import os
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.models import ApiToken, api_key_digest
from webapp.accounts.services import ApiTokenExists, api_token_create, api_token_rotate


class Command(BaseCommand):
    help = (
        "Make USERNAME's API token and print its key (for `Authorization: Token KEY`); "
        "a key is shown only when made: --rotate replaces an existing token."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the token; the old one stops working"
        )
        parser.add_argument(
            "--keep",
            metavar="FILE",
            help="print the key kept in FILE while it is the user's token, else make a new "
            "one and keep it there (0600)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive: its token would be refused")
        if options["keep"]:
            key = _kept_key(user, Path(options["keep"]))
        elif options["rotate"]:
            key = api_token_rotate(user=user)
        else:
            try:
                key = api_token_create(user=user)
            except ApiTokenExists as exists:
                raise CommandError(
                    f"{exists}, whose key is not kept and cannot be shown again: "
                    "--rotate replaces it (scripts using the old key then stop working)"
                ) from exists
        self.stdout.write(key)


def _kept_key(user: Any, path: Path) -> str:
    kept = path.read_text().strip() if path.is_file() else ""
    if kept and ApiToken.objects.filter(user=user, digest=api_key_digest(kept)).exists():
        return kept
    key = api_token_rotate(user=user)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(key + "\n")
    path.chmod(0o600)
    return key
