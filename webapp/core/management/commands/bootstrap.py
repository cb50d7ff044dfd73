"""`manage.py bootstrap`: what a fresh local installation needs to be usable at once.

Registers the running lab, makes an admin account (printing its password once) and an
example campaign on the lab's sites. Safe to run again: it only adds what is missing.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from webapp.campaigns.models import Campaign
from webapp.sites.models import Endpoint
from webapp.sites.services import lab_register, vantage_point_local
from workers.lab import Lab

EXAMPLE = "Lab example: direct vs copy at the near site"
ADMIN = "admin"


class Command(BaseCommand):
    help = "Register the lab, create an admin account and an example campaign (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        vantage_point = vantage_point_local()
        lab = Lab(settings.FEDPROBE_LAB_DIR)
        if lab.is_running():
            registered = lab_register(lab=lab)
            self.stdout.write(f"lab: {registered.endpoints} endpoints registered")
        self._admin()
        endpoints = list(Endpoint.objects.filter(name__in=["lab-near-root", "lab-near-http"]))
        if endpoints and not Campaign.objects.filter(name=EXAMPLE).exists():
            campaign = Campaign.objects.create(
                name=EXAMPLE,
                description="Paper 000's question on the lab: read in place, or copy first?",
                owner=User.objects.get(username=ADMIN),
                methods=["direct", "copy"],
                patterns=["sequential", "random"],
                read_sizes=[4096, 1024 * 1024],
                fractions=[0.01],
                clients=[1, 4],
            )
            campaign.endpoints.set(endpoints)
            campaign.vantage_points.set([vantage_point])
            self.stdout.write(f"example campaign: {campaign.name} ({campaign.matrix_size()} runs)")

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
