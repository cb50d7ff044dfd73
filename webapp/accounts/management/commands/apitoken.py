"""`manage.py apitoken USERNAME`: print the user's API token, creating it if needed."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.services import api_token_get_or_create, api_token_rotate


class Command(BaseCommand):
    help = "Print USERNAME's API token (for `Authorization: Token KEY`), creating one if needed."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the token; the old one stops working"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive: its token would be refused")
        if options["rotate"]:
            key = api_token_rotate(user=user)
        else:
            key = api_token_get_or_create(user=user)
        self.stdout.write(key)
