"""`manage.py setrole USERNAME viewer|operator|admin`: give a user exactly that role."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import ROLES
from webapp.accounts.services import user_set_role


class Command(BaseCommand):
    help = "Give USERNAME exactly one role: viewer (reads), operator (+ creates), admin (+ edits)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=ROLES)

    def handle(self, *args: Any, **options: Any) -> None:
        username, role = options["username"], options["role"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        user_set_role(user=user, role=role)
        self.stdout.write(f"{username} is now {role}")
