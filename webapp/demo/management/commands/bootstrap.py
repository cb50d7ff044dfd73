"""`manage.py bootstrap`: what a fresh local installation needs to be usable at once.

Registers the running lab, makes an admin account (printing its password once) and an
example campaign on the lab's sites. Safe to run again: it only adds what is missing.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from webapp.campaigns.models import Campaign
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint, VantagePoint
from webapp.sites.services import local_ca_dir, vantage_point_local
from workers.lab import Lab

EXAMPLE = "Lab example: direct vs copy at the near site"
AUTH_EXAMPLE = "Lab example: what TLS and authentication cost at the near site"
# The near site's doors: anonymous, a WLCG token (roots, https), an X.509 proxy (gsi, https).
AUTH_ENDPOINTS = (
    "near-root",
    "near-roots",
    "near-gsi-root",
    "near-http",
    "near-https",
    "near-gsi-https",
)
ADMIN = "admin"


class Command(BaseCommand):
    help = "Register the lab, create an admin account and an example campaign (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        vantage_point = vantage_point_local()
        lab = Lab(settings.FEDPROBE_LAB_DIR)
        if lab.is_running():
            registered = lab_register(lab=lab, ca_dir=local_ca_dir())
            self.stdout.write(f"lab: {registered.endpoints} endpoints registered")
        self._admin()
        self._example(
            EXAMPLE,
            ["near-root", "near-http"],
            vantage_point,
            description="Paper 000's question on the lab: read in place, or copy first?",
            methods=["direct", "copy"],
            patterns=["sequential", "random"],
            read_sizes=[4096, 1024 * 1024],
            fractions=[0.01],
            clients=[1, 4],
        )
        self._example(
            AUTH_EXAMPLE,
            AUTH_ENDPOINTS,
            vantage_point,
            description="The same site through each of its doors: plain, with a WLCG token "
            "over TLS, with an X.509 proxy (the lab registers the credentials).",
            methods=["direct"],
            patterns=["random", "sequential"],
            read_sizes=[4096, 1024 * 1024],
            fractions=[0.01],
            clients=[1],
        )

    def _example(
        self,
        name: str,
        endpoint_names: Sequence[str],
        vantage_point: VantagePoint,
        **fields: Any,
    ) -> None:
        endpoints = list(Endpoint.objects.filter(name__in=endpoint_names))
        if not endpoints or Campaign.objects.filter(name=name).exists():
            return
        campaign = Campaign.objects.create(
            name=name, owner=User.objects.get(username=ADMIN), **fields
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
