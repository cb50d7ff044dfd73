"""Writing the configuration file: what the database holds, in the canonical order and style,
without what is volatile (ids, timestamps, owners) or secret (credentials)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webapp.campaigns.configuration.documents import (
    CAMPAIGN,
    ENDPOINT,
    FILE,
    FORMAT_VERSION,
    PARAMETERS,
    SITE,
    TEST_FILE,
    VANTAGE_POINT,
    Shape,
    canonical_yaml,
)
from webapp.campaigns.models import SHARED, Campaign
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.engine.units import size_text

HEADER = "# fedprobe configuration (docs/configuration-as-code.md)\n"
# The parameters in bytes, written as sizes (64k, 1M) as the campaign form shows them.
SIZE_PARAMETERS = frozenset({"read_sizes", *(p.campaign_field for p in SHARED if p.size)})


def configuration_export(*, campaigns: Iterable[Campaign] | None = None) -> str:
    """The file of `campaigns` with the vantage points, sites and endpoints (each with all its
    test files) they use; of everything in the database when None."""
    if campaigns is None:
        chosen = list(Campaign.objects.all())
        endpoints = Endpoint.objects.all()
        vantage_points = VantagePoint.objects.all()
    else:
        chosen = list(campaigns)
        endpoints = Endpoint.objects.filter(campaigns__in=chosen).distinct()
        vantage_points = VantagePoint.objects.filter(campaigns__in=chosen).distinct()
    sites = Site.objects.filter(endpoints__in=endpoints).distinct()
    if campaigns is None:
        sites = Site.objects.all()
    held = list(endpoints.prefetch_related("files"))
    document = _in_order(
        FILE,
        version=FORMAT_VERSION,
        vantage_points=[vantage_point_document(v) for v in vantage_points.order_by("name")],
        sites=[
            site_document(site, [e for e in held if e.site_id == site.pk])
            for site in _by_name(sites)
        ],
        campaigns=[campaign_document(c) for c in sorted(chosen, key=lambda c: (c.name, c.pk))],
    )
    return HEADER + canonical_yaml(document)


def _by_name(sites: Iterable[Site]) -> list[Site]:
    return sorted(sites, key=lambda site: site.name)


def _in_order(shape: Shape, **values: Any) -> dict[str, Any]:
    """The values keyed in the shape's order (the canonical one)."""
    assert set(values) == set(shape.fields), (shape.what, set(values) ^ set(shape.fields))
    return {key: values[key] for key in shape.fields}


def vantage_point_document(vantage_point: VantagePoint) -> dict[str, Any]:
    return _in_order(
        VANTAGE_POINT,
        name=vantage_point.name,
        location=vantage_point.location,
        description=vantage_point.description,
        max_parallel_runs=vantage_point.max_parallel_runs,
    )


def site_document(site: Site, endpoints: list[Endpoint]) -> dict[str, Any]:
    return _in_order(
        SITE,
        name=site.name,
        tier=site.tier,
        storage_system=site.storage_system,
        location=site.location,
        endpoints=[endpoint_document(e) for e in sorted(endpoints, key=lambda e: e.name)],
    )


def endpoint_document(endpoint: Endpoint, *, with_files: bool = True) -> dict[str, Any]:
    """An endpoint without its credential: neither its text nor its kind is written (the
    kind cannot be imported without the text, and a round trip must give the same file)."""
    files = sorted(endpoint.files.all(), key=lambda f: f.path) if with_files else []
    return _in_order(
        ENDPOINT,
        name=endpoint.name,
        protocol=endpoint.protocol,
        base_url=endpoint.base_url,
        role=endpoint.role,
        enabled=endpoint.enabled,
        credential_hosts=list(endpoint.credential_hosts),
        scratch_path=endpoint.scratch_path,
        test_files=[test_file_document(f) for f in files],
    )


def test_file_document(test_file: TestFile) -> dict[str, Any]:
    return _in_order(
        TEST_FILE,
        path=test_file.path,
        size=test_file.size,
        adler32=test_file.adler32,
        is_default=test_file.is_default,
    )


def campaign_document(campaign: Campaign) -> dict[str, Any]:
    """A campaign with the endpoints it holds, by name (a selector it was imported with was
    resolved then: the campaign holds endpoints, not selectors)."""
    files = campaign.test_files.select_related("endpoint")
    return _in_order(
        CAMPAIGN,
        name=campaign.name,
        description=campaign.description,
        endpoints=sorted(e.name for e in campaign.endpoints.all()),
        test_files=[
            {"endpoint": f.endpoint.name, "path": f.path}
            for f in sorted(files, key=lambda f: (f.endpoint.name, f.path))
        ],
        vantage_points=sorted(v.name for v in campaign.vantage_points.all()),
        destination_endpoint=(
            campaign.destination_endpoint.name if campaign.destination_endpoint else ""
        ),
        trace=campaign.trace.name if campaign.trace else "",
        parameters={name: _parameter(name, getattr(campaign, name)) for name in PARAMETERS.fields},
        schedule=campaign.schedule,
        schedule_tz=campaign.schedule_tz,
        schedule_slip_s=campaign.schedule_slip_s,
    )


def _parameter(name: str, value: Any) -> Any:
    if name not in SIZE_PARAMETERS:
        return value
    if isinstance(value, list):
        return [_size(item) for item in value]
    return _size(value)


def _size(n_bytes: int) -> int | str:
    """64k, 1M; a number of bytes that is no whole multiple stays a number."""
    text = size_text(n_bytes)
    return int(text) if text.isdigit() else text
