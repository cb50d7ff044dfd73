"""Workflows over sites and endpoints."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.db import transaction
from django.db.models import ProtectedError

from webapp.campaigns.models import Run
from webapp.campaigns.services import run_params
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.engine import InvalidParams, Method, Pattern, RunParams, RunStatus, run_probe
from workers.engine.urls import GRIDFTP_SCHEMES
from workers.lab import Lab

LOCAL_VANTAGE_POINT = "local"
# A connection test reads one small block from the web host: it answers within this.
CONNECTION_TIMEOUT_S = 10
CONNECTION_READ_SIZE = 4096


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


def endpoint_set_enabled(*, endpoint: Endpoint, enabled: bool) -> None:
    """Enable or disable an endpoint: campaigns launch no runs on a disabled one."""
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=enabled)
    endpoint.enabled = enabled


@transaction.atomic
def endpoint_file_add(
    *, endpoint: Endpoint, path: str, size: int, adler32: str = "", is_default: bool = False
) -> TestFile:
    """Add a test file to an endpoint; a new default file replaces the old default."""
    if is_default:
        endpoint.files.filter(is_default=True).update(is_default=False)
    return TestFile.objects.create(
        endpoint=endpoint, path=path, size=size, adler32=adler32, is_default=is_default
    )


def endpoint_file_remove(*, test_file: TestFile) -> bool:
    """Remove a test file; False (and nothing removed) when runs have read it."""
    try:
        with transaction.atomic():
            test_file.delete()
    except ProtectedError:
        return False
    return True


@dataclass(frozen=True)
class ConnectionCheck:
    """What a connection test found: timings and the serving host, or why it failed."""

    ok: bool
    url: str = ""
    open_s: float | None = None
    ttfb_s: float | None = None
    served_by: tuple[str, ...] = ()
    error_class: str = ""
    message: str = ""


def endpoint_test_connection(*, endpoint: Endpoint) -> ConnectionCheck:
    """Read one small block of the endpoint's default test file from this host.

    The parameters are built as a run's are (URL, checksums, file roots and whatever
    policy run_params applies), then cut down to one client, one read and a short timeout.
    Copy-only protocols (GridFTP) copy the smallest test file instead.
    """
    copy_only = endpoint.protocol in GRIDFTP_SCHEMES
    test_file = _smallest_file(endpoint) if copy_only else endpoint.default_file
    if test_file is None:
        return ConnectionCheck(
            ok=False,
            error_class="no-test-file",
            message=f"{endpoint.name} has no test file: add one to test the connection",
        )
    try:
        params = _connection_params(endpoint, test_file, copy_only)
        result = run_probe(params).to_json()
    except InvalidParams as exc:
        return ConnectionCheck(ok=False, url=test_file.url, error_class="invalid", message=str(exc))
    return _connection_check(test_file.url, result)


def _smallest_file(endpoint: Endpoint) -> TestFile | None:
    return endpoint.files.order_by("size", "path").first()


def _connection_params(endpoint: Endpoint, test_file: TestFile, copy_only: bool) -> RunParams:
    read_size = min(CONNECTION_READ_SIZE, max(1, test_file.size))
    probe = Run(
        endpoint=endpoint,
        test_file=test_file,
        method=Method.COPY if copy_only else Method.DIRECT,
        pattern=Pattern.SEQUENTIAL,
        read_size=read_size,
        fraction=min(1.0, read_size / max(1, test_file.size)),
        clients=1,
        files=1,
        deadline_s=CONNECTION_TIMEOUT_S,
    )
    return dataclasses.replace(run_params(probe), seed=1)


def _connection_check(url: str, result: dict[str, object]) -> ConnectionCheck:
    errors = result.get("errors") or []
    assert isinstance(errors, list)
    served_by = result.get("served_by") or []
    assert isinstance(served_by, list)
    if result["status"] == RunStatus.SUCCEEDED:
        return ConnectionCheck(
            ok=True,
            url=url,
            open_s=_seconds(result.get("open_s")),
            ttfb_s=_seconds(result.get("ttfb_s")),
            served_by=tuple(str(s) for s in served_by),
        )
    first = errors[0] if errors else {"class": str(result["status"]), "message": ""}
    return ConnectionCheck(
        ok=False, url=url, error_class=str(first["class"]), message=str(first["message"])
    )


def _seconds(value: object) -> float | None:
    return None if value is None else float(str(value))
