"""Sites and endpoints from GOCDB or CRIC (`manage.py topology import`, docs/topology.md).

An import is planned first, as lines an operator reads (what it creates, updates, disables,
leaves), then applied in one transaction. Its rules:
- It changes only rows of its own source, found again by their external id; a row made
  here (source blank) is never changed, nor given the registry's doors.
- A site belongs to the registry that first made it: another registry adds its doors to it
  and changes nothing of the site itself.
- Nothing is deleted: an imported endpoint whose door is gone from the registry (or out of
  production there) is disabled; one that comes back stays disabled until enabled by hand.
- Every endpoint is checked as the pages check one (the engine's URL rules, the egress
  policy's literal refusals) before anything is written; one bad record changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from django.core.exceptions import ValidationError
from django.db import models, transaction

from webapp.sites.models import Endpoint, Site, Source
from webapp.sites.registry_fetch import MAX_PAGES, document_read, is_url, next_url
from webapp.sites.registry_formats import (
    DoorRecord,
    RegistryRefused,
    SiteRecord,
    Topology,
    cric_topology,
    gocdb_next_page,
    gocdb_root,
    gocdb_topology,
)

SITE_FIELDS = ("tier", "location", "storage_system")
# How a plan's summary lists its actions: changes first.
_ORDER = ("create", "update", "disable", "end", "remove", "unchanged", "keep", "skip", "gone")
ENDPOINT_FIELDS = ("protocol", "base_url", "role", "door_auth")


@dataclass
class ImportPlan:
    """What an import would do: `lines` to show, and the rows it writes when applied."""

    source: str
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    new_sites: list[Site] = field(default_factory=list)
    new_endpoints: list[Endpoint] = field(default_factory=list)
    changed: list[models.Model] = field(default_factory=list)

    def say(self, action: str, text: str) -> None:
        self.lines.append(f"{action:<9} {text}")
        self.counts[action] = self.counts.get(action, 0) + 1

    @property
    def summary(self) -> str:
        said = sorted(self.counts, key=lambda a: _ORDER.index(a) if a in _ORDER else len(_ORDER))
        return ", ".join(f"{self.counts[action]} {action}" for action in said)

    @property
    def changes_anything(self) -> bool:
        return bool(self.new_sites or self.new_endpoints or self.changed)


def topology_read(
    *, source: str, locations: list[str], client_cert: str = "", client_key: str = ""
) -> Topology:
    """The sites and doors of the registry's documents at `locations` (files or URLs; a paged
    GOCDB answer is followed to its last page). RegistryRefused names what is wrong."""
    if source == Source.CRIC:
        topology = Topology(has_doors=True)
        for where in locations:
            data = document_read(where, client_cert=client_cert, client_key=client_key)
            read = cric_topology(data, source=where)
            for site in read.sites.values():
                topology.add_site(site, implied=True)
            topology.doors += read.doors
            topology.skipped += read.skipped
        return topology
    return gocdb_topology(gocdb_pages(locations, client_cert=client_cert, client_key=client_key))


def gocdb_pages(
    locations: list[str], *, client_cert: str = "", client_key: str = ""
) -> list[Element]:
    """The <results> of GOCDB answers, every page of a paged one."""
    roots = []
    for where in locations:
        page = where
        for _ in range(MAX_PAGES):
            data = document_read(page, client_cert=client_cert, client_key=client_key)
            root = gocdb_root(data, source=page)
            roots.append(root)
            href = gocdb_next_page(root)
            if href is None or not is_url(where):
                break
            page = next_url(page, href)
    return roots


def topology_plan(*, source: str, topology: Topology) -> ImportPlan:
    """What importing `topology` from `source` would change (nothing is written)."""
    plan = ImportPlan(source=source)
    sites = _plan_sites(plan, topology)
    _plan_endpoints(plan, topology, sites)
    for skipped in topology.skipped:
        plan.say("skip", f"{skipped.record}: {skipped.why}")
    return plan


@transaction.atomic
def topology_apply(plan: ImportPlan) -> None:
    """Write what `plan` says, all or nothing."""
    for site in plan.new_sites:
        site.save()
    for row in plan.changed:
        row.save()
    for endpoint in plan.new_endpoints:  # a new site's id was set by its save above
        endpoint.save()


def _plan_sites(plan: ImportPlan, topology: Topology) -> dict[str, Site | None]:
    """Each site of the import: the row its doors go to (None: a site made here, left)."""
    ours = {s.external_id: s for s in Site.objects.filter(source=plan.source)}
    by_name = {s.name: s for s in Site.objects.filter(name__in=list(topology.sites))}
    placed: dict[str, Site | None] = {}
    for name, record in sorted(topology.sites.items()):
        site = ours.get(name)
        if site is not None:
            _plan_site_update(plan, site, record)
        elif (other := by_name.get(name)) is not None:
            placed[name] = other if other.source else None
            if other.source:
                plan.say("keep", f"site {name}: imported from {other.source}, its doors added")
            else:
                plan.say("keep", f"site {name}: made here, not changed; its doors not imported")
            continue
        else:
            site = _site_of(plan, record)
            _check(site, record=f"site {name}", exclude=["owner"])
            plan.new_sites.append(site)
            plan.say("create", f"site {name}" + _described(site, SITE_FIELDS))
        placed[name] = site
    gone = sorted(name for name in ours if name not in topology.sites)
    if gone:
        plan.say(
            "gone", f"sites not in this {plan.source} import, left as they are: " + ", ".join(gone)
        )
    return placed


def _site_of(plan: ImportPlan, record: SiteRecord) -> Site:
    return Site(
        name=record.name,
        tier=record.tier,
        location=record.location[:200],
        storage_system=record.storage_system[:50],
        source=plan.source,
        external_id=record.name,
    )


def _plan_site_update(plan: ImportPlan, site: Site, record: SiteRecord) -> None:
    wanted = _site_of(plan, record)
    changes = _changes(site, wanted, SITE_FIELDS, keep_blank=True)
    if not changes:
        plan.say("unchanged", f"site {site.name}")
        return
    _check(site, record=f"site {site.name}", exclude=["owner"])
    plan.changed.append(site)
    plan.say("update", f"site {site.name}: {changes}")


def _plan_endpoints(plan: ImportPlan, topology: Topology, sites: dict[str, Site | None]) -> None:
    ours = {
        e.external_id: e for e in Endpoint.objects.filter(source=plan.source).select_related("site")
    }
    names = set(Endpoint.objects.values_list("name", flat=True))
    seen: set[str] = set()
    for door in topology.doors:
        site = sites.get(door.site)
        if site is None:
            continue  # its site is one made here: said once, above
        seen.add(door.external_id)
        endpoint = ours.get(door.external_id)
        if endpoint is None:
            _plan_endpoint_create(plan, door, site, names)
        else:
            _plan_endpoint_update(plan, door, site, endpoint)
    if topology.has_doors:
        covered = {site.name for site in sites.values() if site is not None}
        for external_id, endpoint in sorted(ours.items()):
            if external_id not in seen and endpoint.site.name in covered:
                _plan_endpoint_gone(plan, endpoint)


def _plan_endpoint_create(plan: ImportPlan, door: DoorRecord, site: Site, names: set[str]) -> None:
    if door.name in names:
        plan.say(
            "keep", f"endpoint {door.name}: the name is taken here; {door.record} not imported"
        )
        return
    endpoint = Endpoint(
        site=site,
        name=door.name,
        protocol=door.protocol,
        base_url=door.base_url,
        role=door.role,
        door_auth=door.door_auth,
        enabled=door.in_production,
        source=plan.source,
        external_id=door.external_id,
    )
    _check(endpoint, record=door.record, exclude=["site", "owner"])
    names.add(door.name)
    plan.new_endpoints.append(endpoint)
    state = "" if door.in_production else ", disabled: not in production"
    plan.say(
        "create",
        f"endpoint {door.name} {endpoint.base_url} (site {site.name}, "
        f"door {endpoint.door_auth or 'auth not said'}{state})",
    )


def _plan_endpoint_update(
    plan: ImportPlan, door: DoorRecord, site: Site, endpoint: Endpoint
) -> None:
    wanted = Endpoint(
        protocol=door.protocol, base_url=door.base_url, role=door.role, door_auth=door.door_auth
    )
    if any(getattr(endpoint, name) != getattr(wanted, name) for name in ENDPOINT_FIELDS):
        # Only what changed is checked again (what is stored passed these checks).
        _check(wanted, record=door.record, exclude=["site", "owner", "name"])
    changes = _changes(endpoint, wanted, ENDPOINT_FIELDS)
    if endpoint.site.name != site.name:
        changes = ", ".join(filter(None, [changes, f"site {endpoint.site.name} -> {site.name}"]))
        endpoint.site = site
    if endpoint.enabled and not door.in_production:
        endpoint.enabled = False
        changes = ", ".join(filter(None, [changes, "disabled: not in production"]))
    if not changes:
        plan.say("unchanged", f"endpoint {endpoint.name}")
        return
    plan.changed.append(endpoint)
    plan.say("update", f"endpoint {endpoint.name}: {changes}")


def _plan_endpoint_gone(plan: ImportPlan, endpoint: Endpoint) -> None:
    if not endpoint.enabled:
        plan.say("unchanged", f"endpoint {endpoint.name}: not in {plan.source}, disabled")
        return
    endpoint.enabled = False
    plan.changed.append(endpoint)
    plan.say(
        "disable", f"endpoint {endpoint.name}: no longer in {plan.source} (kept, with its runs)"
    )


def _changes(
    row: Site | Endpoint, wanted: Site | Endpoint, fields: tuple[str, ...], keep_blank: bool = False
) -> str:
    """Set `fields` of `row` to `wanted`'s; say what changed ("" when nothing did). With
    `keep_blank`, a value the registry does not give (blank) leaves the stored one."""
    said = []
    for name in fields:
        old, new = getattr(row, name), getattr(wanted, name)
        if old != new and not (keep_blank and new == ""):
            said.append(f"{name} {old!r} -> {new!r}")
            setattr(row, name, new)
    return ", ".join(said)


def _described(row: Site | Endpoint, fields: tuple[str, ...]) -> str:
    parts = [f"{name} {getattr(row, name)}" for name in fields if getattr(row, name)]
    return f" ({', '.join(parts)})" if parts else ""


def _check(row: Site | Endpoint, *, record: str, exclude: list[str]) -> None:
    """The checks the pages make (the model's fields and clean()); RegistryRefused names
    the record and the field."""
    try:
        row.full_clean(exclude=exclude, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        field_name, messages = next(iter(exc.message_dict.items()))
        raise RegistryRefused(record, field_name, "; ".join(messages)) from None
