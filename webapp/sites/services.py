"""Workflows over sites and endpoints."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.lab import Lab

LOCAL_VANTAGE_POINT = "local"


@dataclass(frozen=True)
class Registered:
    """What `lab register` recorded."""

    sites: int
    endpoints: int
    files: int


def vantage_point_local() -> VantagePoint:
    """The vantage point of this host, used when a campaign names none."""
    vantage_point, _ = VantagePoint.objects.get_or_create(
        name=LOCAL_VANTAGE_POINT, defaults={"location": "this host"}
    )
    return vantage_point


@transaction.atomic
def lab_register(*, lab: Lab) -> Registered:
    """Record the running lab's sites, endpoints and test files (idempotent).

    Each endpoint's largest file is its default test file.
    """
    sites, endpoints, files = set(), 0, 0
    for lab_endpoint in lab.endpoints():
        site, _ = Site.objects.update_or_create(
            name=f"lab-{lab_endpoint.site}",
            defaults={"tier": "lab", "storage_system": "xrootd", "location": "loopback"},
        )
        sites.add(site.pk)
        endpoint, _ = Endpoint.objects.update_or_create(
            name=f"lab-{lab_endpoint.name}",
            defaults={
                "site": site,
                "protocol": lab_endpoint.protocol,
                "base_url": lab_endpoint.url,
                "role": lab_endpoint.role,
                "enabled": True,
            },
        )
        endpoints += 1
        largest = max(lab_endpoint.files, key=lambda f: f.size).path if lab_endpoint.files else ""
        for lab_file in lab_endpoint.files:
            TestFile.objects.update_or_create(
                endpoint=endpoint,
                path=lab_file.path,
                defaults={
                    "size": lab_file.size,
                    "adler32": lab_file.adler32,
                    "is_default": lab_file.path == largest,
                },
            )
            files += 1
    vantage_point_local()
    return Registered(len(sites), endpoints, files)
