"""`manage.py bootstrap`: what a fresh local installation needs to be usable at once.

Registers the running lab, makes an admin account (printing its password once) and the example
campaigns on the lab's sites, one per question of the papers (webapp/demo/examples.py). Safe
to run again: it only adds what is missing, and removes the examples of earlier versions that
were never launched (README, Upgrading).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from webapp.demo.examples import EXAMPLES, example_create, former_examples_remove
from webapp.demo.services import lab_register
from webapp.sites.services import local_ca_dir, vantage_point_local
from workers.lab import Lab

ADMIN = "admin"


class Command(BaseCommand):
    help = "Register the lab, create an admin account and the example campaigns (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        vantage_point = vantage_point_local()
        lab = Lab(settings.FEDPROBE_LAB_DIR)
        if lab.is_running():
            registered = lab_register(lab=lab, ca_dir=local_ca_dir())
            self.stdout.write(f"lab: {registered.endpoints} endpoints registered")
        self._admin()
        for name in former_examples_remove():
            self.stdout.write(f"removed the former example campaign {name!r} (never launched)")
        owner = User.objects.get(username=ADMIN)
        for example in EXAMPLES:
            campaign = example_create(example, owner=owner, vantage_point=vantage_point)
            if campaign is not None:
                runs = campaign.matrix_size()
                self.stdout.write(f"example campaign: {campaign.name} ({runs} runs)")

    def _admin(self) -> None:
        password_file = settings.VAR_DIR / "admin-password"
        if User.objects.filter(username=ADMIN).exists():
            if password_file.exists():
                self.stdout.write(f"admin account: {ADMIN}, password in {password_file}")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(ADMIN, password=password)
        password_file.touch(mode=0o600)
        password_file.write_text(password + "\n")
        self.stdout.write(f"admin account: {ADMIN} / {password} (also in {password_file})")
