"""What fedprobe reads of the registries' documents (docs/topology.md has the tables): GOCDB's
programmatic interface XML (`get_site`, `get_service_endpoint`, `get_downtime` and
`get_downtime_nested_services`) and WLCG CRIC's storage services JSON
(`/api/core/service/query/?json&type=SE`). Parsing only: records out, nothing stored.

XML is parsed with defusedxml (no DTD, no entities: a registry's answer cannot make us read a
local file or expand a billion laughs)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import urlsplit
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from webapp.core.redact import redact
from webapp.sites.models import DoorAuth


class RegistryRefused(ValueError):
    """A document (or one record of it) fedprobe cannot take; nothing is changed. Its text
    holds no secret (a URL's password or token is redacted)."""

    def __init__(self, record: str, field: str, message: str) -> None:
        super().__init__(redact(f"{record}: {field}: {message}"))
        self.record = record
        self.field = field
        self.message = message


@dataclass(frozen=True)
class SiteRecord:
    """A site as a registry describes it; its name is also its id there."""

    name: str
    tier: str = ""
    location: str = ""
    storage_system: str = ""


@dataclass(frozen=True)
class DoorRecord:
    """One storage door (protocol and URL) of a site, as a registry describes it."""

    external_id: str
    site: str
    name: str
    protocol: str
    base_url: str
    door_auth: str
    in_production: bool
    record: str  # how errors name it: "SERVICE_ENDPOINT 123G0 (XRootD on host)"
    role: str = "data"


@dataclass(frozen=True)
class Skipped:
    """A record read but not imported, and why (a service type fedprobe does not measure)."""

    record: str
    why: str


@dataclass
class Topology:
    """Sites and doors of one import; `has_doors`: the documents list doors (so a door of
    theirs that is missing has gone)."""

    sites: dict[str, SiteRecord] = field(default_factory=dict)
    doors: list[DoorRecord] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    has_doors: bool = False

    def add_site(self, site: SiteRecord, *, implied: bool = False) -> None:
        """An explicit site record wins over one implied by a door; implied ones fill gaps."""
        known = self.sites.get(site.name)
        if known is None or not implied:
            self.sites[site.name] = site
        elif not known.storage_system and site.storage_system:
            self.sites[site.name] = SiteRecord(
                known.name, known.tier, known.location or site.location, site.storage_system
            )


# GOCDB service types that are doors fedprobe measures, and the schemes their URLs may have.
GOCDB_SERVICE_TYPES: dict[str, tuple[str, ...]] = {
    "webdav": ("davs", "https"),
    "xrootd": ("root", "roots"),
    "xrootd.redirector": ("root", "roots"),
    "globus-gridftp": ("gsiftp",),
    "gridftp": ("gsiftp",),
}
# CRIC protocol flavours: the schemes their endpoints may have, the first when it gives none.
CRIC_FLAVOURS: dict[str, tuple[str, ...]] = {
    "XROOTD": ("root", "roots"),
    "WEBDAV": ("davs", "https"),
    "HTTP": ("https", "davs", "http"),
    "GSIFTP": ("gsiftp",),
}
_NOT_MEASURED = {"srm", "srm.nearline", "srm.online"}
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 100


def door_name(*parts: str) -> str:
    """An endpoint name (letters, digits, '.', '_', '-') made of the registry's names."""
    name = _NAME_CHARS.sub("-", "-".join(part for part in parts if part)).strip("-._")
    return name[:_MAX_NAME].rstrip("-._") or "door"


def tier_of(text: str) -> str:
    """GOCDB's and CRIC's tiers ("1", "Tier 2", 2) as fedprobe writes them (T1, T2)."""
    text = str(text).strip()
    digits = re.fullmatch(r"(?:tier|t)?\s*([0-9])", text, re.I)
    return f"T{digits.group(1)}" if digits else text[:20]


# --- GOCDB -------------------------------------------------------------------------------


def gocdb_root(data: bytes, *, source: str) -> Element:
    """The <results> element of one GOCDB PI answer."""
    try:
        root = fromstring(data, forbid_dtd=True)
    except (ParseError, DefusedXmlException) as exc:
        raise RegistryRefused(source, "XML", f"not well-formed GOCDB XML: {exc}") from None
    if root.tag != "results":
        raise RegistryRefused(source, "XML", f"<{root.tag}> is not GOCDB's <results>")
    return root


def gocdb_next_page(root: Element) -> str | None:
    """The href of a paged answer's <meta><link rel="next">, if any."""
    for link in root.iterfind("meta/link"):
        if link.get("rel") == "next" and link.get("href"):
            return link.get("href")
    return None


def gocdb_topology(roots: list[Element], *, into: Topology | None = None) -> Topology:
    """Sites (get_site) and doors (get_service_endpoint) of GOCDB answers, in any mix."""
    topology = into or Topology()
    names: set[str] = {door.name for door in topology.doors}
    for root in roots:
        for site in root.iter("SITE"):
            topology.add_site(_gocdb_site(site))
        for service in root.iter("SERVICE_ENDPOINT"):
            topology.has_doors = True
            for read in _gocdb_doors(service, topology):
                door = read
                if door.name in names:  # two services of one type on one host
                    door = replace(door, name=door_name(door.name, door.external_id))
                names.add(door.name)
                topology.doors.append(door)
    return topology


def _text(element: Element, tag: str) -> str:
    return (element.findtext(tag) or "").strip()


def _gocdb_site(site: Element) -> SiteRecord:
    name = _text(site, "SHORT_NAME") or (site.get("NAME") or "").strip()
    if not name:
        raise RegistryRefused(f"SITE {site.get('PRIMARY_KEY', '?')}", "SHORT_NAME", "is empty")
    return SiteRecord(name=name, tier=tier_of(_text(site, "TIER")), location=_text(site, "COUNTRY"))


def _gocdb_doors(service: Element, topology: Topology) -> Iterator[DoorRecord]:
    """The doors of one service: its URL and its ENDPOINTS' URLs of its type's schemes."""
    key = (service.get("PRIMARY_KEY") or _text(service, "PRIMARY_KEY")).strip()
    host, kind = _text(service, "HOSTNAME"), _text(service, "SERVICE_TYPE")
    record = f"SERVICE_ENDPOINT {key or '?'} ({kind} on {host or '?'})"
    if not key:
        raise RegistryRefused(record, "PRIMARY_KEY", "is empty")
    schemes = GOCDB_SERVICE_TYPES.get(kind.lower())
    if schemes is None:
        topology.skipped.append(Skipped(record, _not_measured(kind)))
        return
    site = _text(service, "SITENAME")
    if not site:
        raise RegistryRefused(record, "SITENAME", "is empty")
    topology.add_site(SiteRecord(name=site, location=_text(service, "COUNTRY_NAME")), implied=True)
    in_production = _text(service, "IN_PRODUCTION").upper() == "Y"
    role = "redirector" if kind.lower().endswith(".redirector") else "data"

    def door(external_id: str, name: str, url: str, record: str) -> DoorRecord:
        # GOCDB does not say whether a door takes tokens; its grid storage doors take X.509.
        scheme = _scheme(url)
        return DoorRecord(
            external_id, site, name, scheme, url, DoorAuth.X509, in_production, record, role
        )

    url = _text(service, "URL")
    if url and _scheme(url) not in schemes:
        raise RegistryRefused(
            record, "URL", f"scheme {_scheme(url)!r} of {url!r} is not one of {', '.join(schemes)}"
        )
    doors = [door(key, door_name(site, kind, host), url, record)] if url else []
    for endpoint in service.iterfind("ENDPOINTS/ENDPOINT"):
        sub_url, sub_id = _text(endpoint, "URL"), _text(endpoint, "ID")
        if not sub_url or sub_url == url:
            continue
        sub_record = f"{record} ENDPOINT {sub_id}"
        if _scheme(sub_url) not in schemes:
            topology.skipped.append(Skipped(sub_record, f"{sub_url!r} is not a {kind} URL"))
            continue
        name = door_name(site, kind, host, _text(endpoint, "NAME") or sub_id)
        doors.append(door(f"{key}/{sub_id}", name, sub_url, sub_record))
    if not doors:
        topology.skipped.append(Skipped(record, "no URL in GOCDB: fedprobe needs the door's URL"))
    yield from doors


def _not_measured(kind: str) -> str:
    if kind.lower() in _NOT_MEASURED:
        return "fedprobe has no SRM client"
    return "not a storage door fedprobe measures"


def _scheme(url: str) -> str:
    """The URL's scheme, lower case ("" when it is no URL: the endpoint's checks say why)."""
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


# --- CRIC --------------------------------------------------------------------------------


def cric_topology(data: bytes, *, source: str) -> Topology:
    """Sites and doors of CRIC's storage services (service/query/?json&type=SE): an object of
    services by name, each with its rcsite and its protocols by name."""
    try:
        services = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryRefused(source, "JSON", f"not JSON: {exc}") from None
    if not isinstance(services, dict):
        raise RegistryRefused(source, "JSON", "not CRIC's object of services by name")
    topology = Topology(has_doors=True)
    for name, service in sorted(services.items()):
        record = f"service {name}"
        if not isinstance(service, dict):
            raise RegistryRefused(record, "service", "is not an object")
        if str(service.get("type", "SE")) != "SE":
            topology.skipped.append(Skipped(record, f"type {service.get('type')!r} is not SE"))
            continue
        site = str(service.get("rcsite") or "").strip()
        if not site:
            topology.skipped.append(Skipped(record, "no rcsite"))
            continue
        topology.add_site(
            SiteRecord(
                name=site,
                location=str(service.get("country") or ""),
                storage_system=str(service.get("impl") or ""),
            ),
            implied=True,
        )
        protocols = service.get("protocols") or {}
        if not isinstance(protocols, dict):
            raise RegistryRefused(record, "protocols", "is not an object of protocols by name")
        for key, protocol in sorted(protocols.items()):
            door = _cric_door(site, f"{record} protocol {key}", key, protocol, topology)
            if door is not None:
                topology.doors.append(door)
    return topology


def _cric_door(
    site: str, record: str, key: str, protocol: object, topology: Topology
) -> DoorRecord | None:
    if not isinstance(protocol, dict):
        raise RegistryRefused(record, "protocol", "is not an object")
    flavour = str(protocol.get("flavour") or "").upper()
    schemes = CRIC_FLAVOURS.get(flavour)
    if schemes is None:
        why = f"flavour {flavour or 'none'}: " + _not_measured(flavour)
        topology.skipped.append(Skipped(record, why))
        return None
    endpoint = str(protocol.get("endpoint") or "").strip()
    if not endpoint:
        raise RegistryRefused(record, "endpoint", "is empty")
    if "://" not in endpoint:  # host:port: the flavour says the scheme
        endpoint = f"{schemes[0]}://{endpoint}"
    scheme = _scheme(endpoint)
    if scheme not in schemes:
        raise RegistryRefused(
            record, "endpoint", f"scheme {scheme!r} of {endpoint!r} is not {flavour}'s"
        )
    path = str(protocol.get("basepath") or protocol.get("path") or "")
    base_url = endpoint.rstrip("/") + "/" + path.lstrip("/")
    token = protocol.get("token_support") is True
    return DoorRecord(
        external_id=str(protocol.get("id") or key),
        site=site,
        name=door_name(str(protocol.get("name") or key)),
        protocol=scheme,
        base_url=base_url,
        door_auth=DoorAuth.X509_TOKEN if token else DoorAuth.X509,
        in_production=str(protocol.get("state") or "ACTIVE").upper() == "ACTIVE",
        record=record,
    )


# --- GOCDB downtimes ---------------------------------------------------------------------


@dataclass(frozen=True)
class DowntimeService:
    """A service a GOCDB downtime covers."""

    hostname: str
    service_type: str
    primary_key: str = ""  # given by get_downtime_nested_services only
    site: str = ""


@dataclass
class DowntimeRecord:
    """One GOCDB downtime with all the services it covers (get_downtime repeats a downtime
    once per service; they are gathered here by PRIMARY_KEY)."""

    primary_key: str
    start: datetime
    end: datetime
    severity: str
    scheduled: bool
    description: str
    services: list[DowntimeService] = field(default_factory=list)


def gocdb_downtimes(roots: list[Element]) -> dict[str, DowntimeRecord]:
    """The downtimes of GOCDB get_downtime (or get_downtime_nested_services) answers."""
    downtimes: dict[str, DowntimeRecord] = {}
    for root in roots:
        for element in root.iter("DOWNTIME"):
            downtime = _gocdb_downtime(element)
            known = downtimes.setdefault(downtime.primary_key, downtime)
            if known is not downtime:
                known.services.extend(downtime.services)
    return downtimes


def _gocdb_downtime(element: Element) -> DowntimeRecord:
    key = (element.get("PRIMARY_KEY") or _text(element, "PRIMARY_KEY")).strip()
    record = f"DOWNTIME {key or '?'}"
    if not key:
        raise RegistryRefused(record, "PRIMARY_KEY", "is empty")
    severity = _text(element, "SEVERITY").lower()
    if severity not in ("outage", "warning"):
        raise RegistryRefused(record, "SEVERITY", f"{severity!r} is not OUTAGE or WARNING")
    classification = (element.get("CLASSIFICATION") or "").upper()
    if classification not in ("SCHEDULED", "UNSCHEDULED"):
        raise RegistryRefused(
            record, "CLASSIFICATION", f"{classification!r} is not SCHEDULED or UNSCHEDULED"
        )
    start = _gocdb_time(element, "START_DATE", record)
    end = _gocdb_time(element, "END_DATE", record)
    if end <= start:
        raise RegistryRefused(record, "END_DATE", "is not after START_DATE")
    services = [
        DowntimeService(
            hostname=_text(service, "HOSTNAME").lower(),
            service_type=_text(service, "SERVICE_TYPE"),
            primary_key=_text(service, "PRIMARY_KEY"),
            site=_text(service, "HOSTED_BY"),
        )
        for service in element.iterfind("SERVICES/SERVICE")
    ]
    if not services:  # get_downtime: one element per service
        services = [
            DowntimeService(
                hostname=_text(element, "HOSTNAME").lower(),
                service_type=_text(element, "SERVICE_TYPE"),
                site=_text(element, "HOSTED_BY") or _text(element, "SITENAME"),
            )
        ]
    return DowntimeRecord(
        primary_key=key,
        start=start,
        end=end,
        severity=severity,
        scheduled=classification == "SCHEDULED",
        description=_text(element, "DESCRIPTION"),
        services=services,
    )


def _gocdb_time(element: Element, tag: str, record: str) -> datetime:
    """A time as GOCDB gives it: seconds since the epoch, else its FORMATED_ text (UTC)."""
    epoch = _text(element, tag)
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch), tz=UTC)
        except (ValueError, OverflowError, OSError):
            raise RegistryRefused(record, tag, f"{epoch!r} is not seconds since 1970") from None
    formatted = _text(element, f"FORMATED_{tag}")
    try:
        return datetime.strptime(formatted, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    except ValueError:
        raise RegistryRefused(record, tag, "is missing (nor FORMATED_ given)") from None
