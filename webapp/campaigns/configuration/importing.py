"""Importing a configuration file: every object is judged by the form its page uses (a file is
refused for what a page refuses, in the same words, at the line of the field), objects are
matched by name, and it all happens in one transaction, kept only when every object is valid
and permitted, and never for a dry run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, models, transaction

from webapp.accounts.roles import User, can_edit, can_operate, is_admin
from webapp.campaigns.configuration.documents import (
    CAMPAIGN,
    ENDPOINT,
    ENDPOINT_SELECTOR,
    FILE,
    FORMAT_VERSION,
    LIST,
    MAP,
    PARAMETERS,
    SCALAR,
    SITE,
    TEST_FILE,
    TEST_FILE_REFERENCE,
    TEXT,
    VANTAGE_POINT,
    ConfigError,
    Located,
    Shape,
    as_text,
    child,
    is_kind,
    read_yaml,
    shape_errors,
)
from webapp.campaigns.configuration.export import (
    campaign_document,
    endpoint_document,
    site_document,
    test_file_document,
    vantage_point_document,
)
from webapp.campaigns.forms import CampaignForm, ValueListField
from webapp.campaigns.models import AXES, CAMPAIGN_PARAMETER_FIELDS, Campaign
from webapp.campaigns.traces import Trace
from webapp.sites.forms import EndpointForm, SiteForm, TestFileForm, VantagePointForm
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

_Saved = TypeVar("_Saved")
# A campaign's form fields that name other rows: their errors are moot when a reference failed.
RELATIONS = ("endpoints", "test_files", "vantage_points")
_SCHEDULE = ("schedule", "schedule_tz", "schedule_slip_s")


@dataclass(frozen=True)
class PlanStep:
    """What an import does to one object: create, update (which fields) or leave it."""

    kind: str
    name: str
    action: str
    changes: tuple[str, ...] = ()

    def text(self) -> str:
        changed = f" ({', '.join(self.changes)})" if self.changes else ""
        return f"{self.action} {self.kind} {self.name}{changed}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "changes": list(self.changes),
        }


@dataclass(frozen=True)
class ImportOutcome:
    """The plan, the errors (by line), and whether the plan was applied (no errors, no dry
    run)."""

    plan: list[PlanStep]
    errors: list[ConfigError]
    applied: bool

    @property
    def only_forbidden(self) -> bool:
        """The file is valid, but the user may not make some of its changes."""
        return bool(self.errors) and all(error.forbidden for error in self.errors)

    def counts(self) -> dict[str, int]:
        actions = ("create", "update", "unchanged")
        return {action: sum(step.action == action for step in self.plan) for action in actions}


def configuration_import(*, text: str, as_user: User | None, dry_run: bool) -> ImportOutcome:
    """Validate the whole file and, if every object is valid and permitted, apply it (unless
    `dry_run`). `as_user` None is the command line, whose user administers the deployment:
    everything is permitted and new rows have no owner (admins' rows); a user's roles and
    ownership decide as on the pages and the API, and what they create is theirs.

    Nothing is deleted, and no credential is set or changed (docs/configuration-as-code.md).
    """
    located, errors = read_yaml(text)
    if located is None:
        return ImportOutcome([], errors, applied=False)
    with transaction.atomic():
        run = _Import(located, as_user)
        run.errors.extend(errors)
        run.whole_file()
        applied = not run.errors and not dry_run
        if not applied:
            transaction.set_rollback(True)
    ordered = sorted(run.errors, key=lambda error: (error.line, error.path))
    return ImportOutcome(run.plan, ordered, applied)


def _values(row: models.Model | None, fields: tuple[str, ...]) -> dict[str, Any] | None:
    return None if row is None else {field: getattr(row, field) for field in fields}


def _endpoint_values(endpoint: Endpoint, fields: tuple[str, ...]) -> dict[str, Any]:
    values = _values(endpoint, fields) or {}
    values["site"] = values.pop("site_id")
    return values


def _form_data(value: dict[str, Any], shape: Shape, model: type[models.Model]) -> dict[str, Any]:
    """A mapping's own fields as its form reads them; one left out is the model's default."""
    data: dict[str, Any] = {}
    for key, kind in shape.fields.items():
        if kind in (LIST, MAP):
            continue
        item = value.get(key)
        if item is None:
            field = model._meta.get_field(key)
            item = field.get_default() if isinstance(field, models.Field) else ""
        data[key] = item if isinstance(item, bool) else as_text(item)
    return data


class _Import:
    """One file's import: its plan and errors, and the objects that failed (references to
    them are not reported again)."""

    def __init__(self, located: Located, as_user: User | None) -> None:
        self.located = located
        self.user = as_user
        self.errors: list[ConfigError] = []
        self.plan: list[PlanStep] = []
        self.failed: set[tuple[str, str]] = set()
        self.seen: dict[tuple[str, str], str] = {}

    # Reporting

    def error(self, path: str, message: str, *, forbidden: bool = False) -> None:
        self.errors.append(ConfigError(self.located.line(path), path, message, forbidden))

    def check(self, value: Any, path: str, shape: Shape) -> bool:
        """Whether the mapping's values can be judged (an unknown field is reported, and the
        rest is still judged: every error at once)."""
        found, judged = shape_errors(value, path, shape, self.located)
        self.errors.extend(found)
        return judged

    def form_errors(
        self, form: forms.BaseForm, path: str, *, skip: frozenset[str] = frozenset()
    ) -> None:
        for field, messages in form.errors.items():
            if field in skip:
                continue
            if field == NON_FIELD_ERRORS:
                at = path
            elif field in CAMPAIGN_PARAMETER_FIELDS and isinstance(form, CampaignForm):
                at = child(child(path, "parameters"), field)
            else:
                at = child(path, field)
            for message in messages:
                self.error(at, str(message))

    def start(
        self, value: Any, path: str, shape: Shape, kind: str, *, key: str = "name", of: str = ""
    ) -> str | None:
        """The object's name (a test file's: `of`:path) when its values are to be judged: its
        form is right, and no other object of the file has its name (else errors say why)."""
        judged = self.check(value, path, shape)
        named = value.get(key) if isinstance(value, dict) else None
        if not is_kind(named, TEXT):
            return None
        name = f"{of}:{as_text(named)}" if of else as_text(named)
        if not self.first(kind, name, path):
            return None
        if not judged:
            self.failed.add((kind, name))
            return None
        return name

    def first(self, kind: str, name: str, path: str) -> bool:
        """Whether this is the file's only object of `kind` named `name` (else an error)."""
        key = (kind, name)
        if key in self.seen:
            other = self.located.line(self.seen[key])
            self.error(path, f"{kind} {name} is also at line {other}: objects are matched by name")
            return False
        self.seen[key] = path
        return True

    def same_as_stored(
        self, kind: str, name: str, value: dict[str, Any], stored: dict[str, Any], nested: str = ""
    ) -> bool:
        """Whether the file gives the object exactly as export writes its stored row (its
        `nested` objects aside): then it is unchanged, and its form is not asked (nothing
        would change). A re-import of an export is quick so."""
        if any(value.get(key) != item for key, item in stored.items() if key != nested):
            return False
        self.plan.append(PlanStep(kind, name, "unchanged"))
        return True

    def may(self, allowed: Callable[[User], bool]) -> bool:
        return self.user is None or allowed(self.user)

    # Deciding and saving

    def decide(
        self,
        *,
        kind: str,
        name: str,
        path: str,
        before: dict[str, Any] | None,
        after: dict[str, Any],
        allowed: bool,
        refusal: str,
    ) -> str | None:
        """The plan's step for a valid object; its action, or None when it is refused."""
        changes: tuple[str, ...] = ()
        if before is None:
            action = "create"
        else:
            changes = tuple(key for key in after if before[key] != after[key])
            action = "update" if changes else "unchanged"
        self.plan.append(PlanStep(kind, name, action, changes))
        if action != "unchanged" and not allowed:
            self.error(path, refusal, forbidden=True)
            self.failed.add((kind, name))
            return None
        return action

    def save(self, path: str, save: Callable[[], _Saved]) -> _Saved | None:
        """Save in a savepoint: a row another process wrote meanwhile is an error, not a
        transaction PostgreSQL has aborted."""
        try:
            with transaction.atomic():
                return save()
        except (IntegrityError, ValidationError) as exc:
            self.error(path, f"not saved: {exc}")
            return None

    def owned(self, form: forms.ModelForm) -> Any:  # type: ignore[type-arg]
        """Save a model form's row, a new one owned by the importing user."""
        row = form.save(commit=False)
        if row.pk is None and self.user is not None:
            row.owner = self.user
        row.save()
        form.save_m2m()
        return row

    # The file

    def whole_file(self) -> None:
        document = self.located.value
        if not isinstance(document, dict):
            self.error("", f"the file must be a mapping that starts with version: {FORMAT_VERSION}")
            return
        self.check(document, "", FILE)
        version = document.get("version")
        if version is not None and version != FORMAT_VERSION:
            self.error("version", f"unknown version {version!r}: this fedprobe reads version 1")
            return
        for i, item in enumerate(self.section(document, "vantage_points")):
            self.vantage_point(item, child("vantage_points", i))
        for i, item in enumerate(self.section(document, "sites")):
            self.site(item, child("sites", i))
        for i, item in enumerate(self.section(document, "campaigns")):
            self.campaign(item, child("campaigns", i))

    def section(self, mapping: dict[str, Any], key: str) -> list[Any]:
        value = mapping.get(key)
        return value if isinstance(value, list) else []

    def vantage_point(self, value: Any, path: str) -> None:
        name = self.start(value, path, VANTAGE_POINT, "vantage point")
        if name is None:
            return
        stored = VantagePoint.objects.filter(name=name).first()
        if stored is not None and self.same_as_stored(
            "vantage point", name, value, vantage_point_document(stored)
        ):
            return
        fields = ("location", "description", "max_parallel_runs")
        before = _values(stored, fields)
        data = _form_data(value, VANTAGE_POINT, VantagePoint)
        form = VantagePointForm(data=data, instance=stored)
        if not form.is_valid():
            self.form_errors(form, path)
            self.failed.add(("vantage point", name))
            return
        action = self.decide(
            kind="vantage point",
            name=name,
            path=path,
            before=before,
            after=_values(form.instance, fields) or {},
            allowed=self.may(is_admin),
            refusal=f"vantage point {name}: only an admin may create or change vantage points",
        )
        if action in ("create", "update"):
            self.save(path, form.save)

    def site(self, value: Any, path: str) -> None:
        name = self.start(value, path, SITE, "site")
        if name is None:
            return
        stored = Site.objects.filter(name=name).first()
        if stored is not None and self.same_as_stored(
            "site", name, value, site_document(stored, []), nested="endpoints"
        ):
            site: Site | None = stored
        else:
            site = self.site_row(value, path, name, stored)
        for i, item in enumerate(self.section(value, "endpoints")):
            self.endpoint(item, child(child(path, "endpoints"), i), site)

    def site_row(self, value: Any, path: str, name: str, stored: Site | None) -> Site | None:
        """The site as the file gives it, saved if valid and permitted; None when it is new
        and not saved."""
        fields = ("tier", "storage_system", "location")
        before = _values(stored, fields)
        form = SiteForm(data=_form_data(value, SITE, Site), instance=stored)
        site = stored
        if not form.is_valid():
            self.form_errors(form, path)
            self.failed.add(("site", name))
        else:
            action = self.decide(
                kind="site",
                name=name,
                path=path,
                before=before,
                after=_values(form.instance, fields) or {},
                allowed=self.may(
                    lambda user: stored.editable_by(user) if stored else can_operate(user)
                ),
                refusal=f"site {name}: only its owner or an admin may change it"
                if stored
                else f"site {name}: creating sites needs the operator role",
            )
            if action in ("create", "update"):
                site = self.save(path, lambda: self.owned(form))
        return site if site is not None and site.pk is not None else None

    def endpoint(self, value: Any, path: str, site: Site | None) -> None:
        name = self.start(value, path, ENDPOINT, "endpoint")
        if name is None:
            return
        if site is None:  # its site's error says why
            self.failed.add(("endpoint", name))
            return
        stored = Endpoint.objects.select_related("site").filter(name=name).first()
        if (
            stored is not None
            and stored.site_id == site.pk
            and self.same_as_stored(
                "endpoint", name, value, endpoint_document(stored, with_files=False), "test_files"
            )
        ):
            endpoint: Endpoint | None = stored
        else:
            endpoint = self.endpoint_row(value, path, name, site, stored)
        if endpoint is None:
            self.failed.add(("endpoint", name))
            return
        for i, item in enumerate(self.section(value, "test_files")):
            self.test_file(item, child(child(path, "test_files"), i), endpoint)

    def endpoint_row(
        self, value: Any, path: str, name: str, site: Site, stored: Endpoint | None
    ) -> Endpoint | None:
        """The endpoint as the file gives it, saved if valid and permitted; None if not."""
        fields = (
            "site_id",
            "protocol",
            "base_url",
            "role",
            "enabled",
            "credential_hosts",
            "scratch_path",
        )
        before = _values(stored, fields)
        if before is not None:
            before["site"] = before.pop("site_id")  # the plan's name for it
        old_site = stored.site if stored else site
        hosts = value.get("credential_hosts") or []
        data = _form_data(value, ENDPOINT, Endpoint) | {
            "site": site.pk,
            "credential_hosts": " ".join(as_text(host) for host in hosts),
            # Kept as they are: credentials (and whom they are shared with) are never imported.
            "credential_teams": [t.pk for t in stored.credential_teams.all()] if stored else [],
        }
        form = EndpointForm(data=data, instance=stored)
        if not form.is_valid():
            self.form_errors(form, path)
            return None
        action = self.decide(
            kind="endpoint",
            name=name,
            path=path,
            before=before,
            after=_endpoint_values(form.instance, fields),
            allowed=self.may(lambda user: site.editable_by(user) and old_site.editable_by(user)),
            refusal=f"endpoint {name}: only the owner of site {site.name} (and of "
            f"{old_site.name}, to move it) or an admin may add or change its endpoints",
        )
        if action in ("create", "update"):
            saved: Endpoint | None = self.save(path, lambda: self.owned(form))
            return saved
        return stored if action is not None else None

    def test_file(self, value: Any, path: str, endpoint: Endpoint) -> None:
        name = self.start(value, path, TEST_FILE, "test file", key="path", of=endpoint.name)
        if name is None:
            return
        stored = endpoint.files.filter(path=as_text(value["path"])).first()
        if stored is not None and self.same_as_stored(
            "test file", name, value, test_file_document(stored)
        ):
            return
        fields = ("size", "adler32", "is_default")
        before = _values(stored, fields)
        data = _form_data(value, TEST_FILE, TestFile)
        form = TestFileForm(data=data, instance=stored, endpoint=endpoint, ask_server=False)
        if not form.is_valid():
            self.form_errors(form, path)
            self.failed.add(("test file", name))
            return
        action = self.decide(
            kind="test file",
            name=name,
            path=path,
            before=before,
            after=_values(form.instance, fields) or {},
            allowed=self.may(endpoint.site.editable_by),
            refusal=f"test file {name}: only the owner of site {endpoint.site.name} or an "
            "admin may add or change its endpoints' files",
        )
        if action in ("create", "update"):
            self.save(path, form.save)

    # Campaigns

    def campaign(self, value: Any, path: str) -> None:
        name = self.start(value, path, CAMPAIGN, "campaign")
        parameters_path = child(path, "parameters")
        parameters = value.get("parameters") if isinstance(value, dict) else None
        if not isinstance(parameters, dict):
            return  # the campaign's check said so
        if not self.check(parameters, parameters_path, PARAMETERS) or name is None:
            return
        same = list(Campaign.objects.filter(name=name)[:3])
        if len(same) > 1:
            self.error(
                child(path, "name"),
                f"{len(same)} campaigns are named {name}: imports match campaigns by name, "
                "so rename them apart first",
            )
            return
        stored = same[0] if same else None
        if stored is not None and self.same_as_stored(
            "campaign", name, value, campaign_document(stored)
        ):
            return
        before = _campaign_values(stored) if stored else None
        endpoints, found_endpoints = self.endpoint_references(value, path)
        test_files, found_files = self.test_file_references(value, path)
        vantage_points, found_points = self.vantage_point_references(value, path)
        # A test file of its endpoints that failed: "no test file known" would say it again.
        lost_files = {name.split(":")[0] for kind, name in self.failed if kind == "test file"}
        complete = found_endpoints and found_files and found_points
        complete = complete and not lost_files & {endpoint.name for endpoint in endpoints}
        form = ImportedCampaignForm(
            data=_campaign_data(value, name, endpoints, test_files, vantage_points),
            instance=stored,
            user=self.user,
        )
        bad_items = self.parameter_items(form, value["parameters"], parameters_path)
        if not form.is_valid() or not complete:
            moot = frozenset({*RELATIONS, NON_FIELD_ERRORS} if not complete else ())
            self.form_errors(form, path, skip=moot | bad_items)
            self.failed.add(("campaign", name))
            return
        action = self.decide(
            kind="campaign",
            name=name,
            path=path,
            before=before,
            after=_campaign_values(form.instance, form.cleaned_data),
            allowed=self.may(lambda user: can_edit(user, stored) if stored else can_operate(user)),
            refusal=f"campaign {name}: only its owner or an admin may change it"
            if stored
            else f"campaign {name}: creating campaigns needs the operator role",
        )
        if action in ("create", "update"):
            self.save(path, lambda: self.owned_campaign(form))

    def owned_campaign(self, form: CampaignForm) -> Campaign:
        if form.instance.pk is None and self.user is not None:
            form.instance.owner = self.user
        return form.save()

    def parameter_items(
        self, form: CampaignForm, parameters: dict[str, Any], path: str
    ) -> set[str]:
        """Each value of the parameter lists parsed by the form's own field, so that an error
        names its item's line; the fields with such errors (the form's error says it again)."""
        bad: set[str] = set()
        for field_name, items in parameters.items():
            field = form.fields.get(field_name)
            if not isinstance(field, ValueListField) or not isinstance(items, list):
                continue
            for i, item in enumerate(items):
                at = child(child(path, field_name), i)
                if not is_kind(item, SCALAR):
                    self.error(at, "must be a text or a number")
                    bad.add(field_name)
                    continue
                try:
                    field.parse(as_text(item))
                except forms.ValidationError as exc:
                    self.error(at, "; ".join(exc.messages))
                    bad.add(field_name)
        return bad

    def endpoint_references(self, value: dict[str, Any], path: str) -> tuple[list[Endpoint], bool]:
        """The endpoints named or selected, and whether every one was found."""
        found: list[Endpoint] = []
        complete = True
        for i, item in enumerate(value["endpoints"]):
            at = child(child(path, "endpoints"), i)
            if isinstance(item, dict):
                matched = self.selected(item, at)
            elif is_kind(item, TEXT):
                matched = self.named(Endpoint, "endpoint", as_text(item), at)
            else:
                self.error(
                    at, "an endpoint's name, or a selector such as {site: X, protocol: root}"
                )
                matched = []
            complete = complete and bool(matched)
            found.extend(endpoint for endpoint in matched if endpoint not in found)
        return found, complete

    def selected(self, selector: dict[str, Any], path: str) -> list[Endpoint]:
        """The enabled endpoints a selector picks (by site name, protocol and role)."""
        if not self.check(selector, path, ENDPOINT_SELECTOR):
            return []
        if not selector:
            self.error(path, "a selector names at least one of site, protocol, role")
            return []
        lookups = {"site__name": "site", "protocol": "protocol", "role": "role"}
        chosen = {
            lookup: as_text(selector[key]) for lookup, key in lookups.items() if key in selector
        }
        matched = list(Endpoint.objects.filter(enabled=True, **chosen).order_by("name"))
        site = chosen.get("site__name")
        if not matched and ("site", site or "") not in self.failed:
            words = ", ".join(f"{key} {as_text(selector[key])}" for key in selector)
            self.error(path, f"selects no enabled endpoint ({words})")
        return matched

    def named(self, model: type[Any], kind: str, name: str, path: str) -> list[Any]:
        row = model.objects.filter(name=name).first()
        if row is not None:
            return [row]
        if (kind, name) not in self.failed:  # else its own error says why
            self.error(path, f"no {kind} named {name!r} in this file or the database")
        return []

    def test_file_references(self, value: dict[str, Any], path: str) -> tuple[list[TestFile], bool]:
        found: list[TestFile] = []
        complete = True
        for i, item in enumerate(value.get("test_files") or []):
            at = child(child(path, "test_files"), i)
            if not self.check(item, at, TEST_FILE_REFERENCE):
                complete = False
                continue
            endpoint, file_path = as_text(item["endpoint"]), as_text(item["path"])
            row = TestFile.objects.filter(endpoint__name=endpoint, path=file_path).first()
            if row is None:
                complete = False
                lost = {("endpoint", endpoint), ("test file", f"{endpoint}:{file_path}")}
                if not lost & self.failed:
                    self.error(at, f"no test file {file_path} on endpoint {endpoint}")
            elif row not in found:
                found.append(row)
        return found, complete

    def vantage_point_references(
        self, value: dict[str, Any], path: str
    ) -> tuple[list[VantagePoint], bool]:
        found: list[VantagePoint] = []
        complete = True
        for i, item in enumerate(value.get("vantage_points") or []):
            at = child(child(path, "vantage_points"), i)
            if not is_kind(item, TEXT):
                self.error(at, "a vantage point's name")
                complete = False
                continue
            matched = self.named(VantagePoint, "vantage point", as_text(item), at)
            complete = complete and bool(matched)
            found.extend(v for v in matched if v not in found)
        return found, complete


class ImportedCampaignForm(CampaignForm):
    """The campaign form, offering every endpoint and test file: a campaign measures the
    endpoints a file names, a disabled one too (as a campaign keeps its disabled ones: they
    are not read); selectors pick enabled ones only. No page shows it: no grouped choices."""

    def _offer_endpoints_and_files(self) -> None:
        self.fields["endpoints"].queryset = Endpoint.objects.all()  # type: ignore[attr-defined]
        self.fields["test_files"].queryset = TestFile.objects.all()  # type: ignore[attr-defined]
        # A file names every axis (documents.PARAMETERS): an empty list is an error there,
        # not the page's default.
        for axis in AXES:
            # Left out, operations is read (files from before operations existed).
            self.fields[axis.campaign_field].required = axis.campaign_field != "operations"


# The campaign form's own fields, with those added below its class (the advanced parameters):
# a subclass would get the model's instead.
ImportedCampaignForm.base_fields = CampaignForm.base_fields


def _campaign_data(
    value: dict[str, Any],
    name: str,
    endpoints: list[Endpoint],
    test_files: list[TestFile],
    vantage_points: list[VantagePoint],
) -> dict[str, Any]:
    """The campaign form's data: lists as the comma-separated text its fields read."""
    data: dict[str, Any] = {
        "name": name,
        "description": as_text(value.get("description")),
        "endpoints": [endpoint.pk for endpoint in endpoints],
        "test_files": [test_file.pk for test_file in test_files],
        "vantage_points": [vantage_point.pk for vantage_point in vantage_points],
        **{key: as_text(value.get(key)) for key in _SCHEDULE},
        "destination_endpoint": _endpoint_pk(as_text(value.get("destination_endpoint"))),
        "trace": _trace_pk(as_text(value.get("trace"))),
    }
    for key, item in value["parameters"].items():
        if isinstance(item, list):
            data[key] = ", ".join(as_text(each) for each in item)
        else:
            data[key] = as_text(item)
    return data


def _endpoint_pk(name: str) -> int | str:
    """A campaign's destination endpoint as its form reads it: the endpoint's id, else the
    name (the form then says no such choice, at destination_endpoint)."""
    endpoint = Endpoint.objects.filter(name=name).first() if name else None
    return endpoint.pk if endpoint is not None else name


def _trace_pk(name: str) -> int | str:
    """A replay campaign's trace as its form reads it: the trace's id, else the name (the
    form then says no such choice, at trace). Traces are uploaded, not configured."""
    trace = Trace.objects.filter(name=name).first() if name else None
    return trace.pk if trace is not None else name


def _campaign_values(campaign: Campaign, cleaned: dict[str, Any] | None = None) -> dict[str, Any]:
    """What an import compares of a campaign: its fields, and its relations by name (those
    a form cleaned, else the saved ones). No vantage point is the local one, as saved."""
    if cleaned is None:
        relations = {name: list(getattr(campaign, name).all()) for name in RELATIONS}
    else:
        relations = {name: list(cleaned[name]) for name in RELATIONS}
    return {
        "description": campaign.description,
        **{name: getattr(campaign, name) for name in CAMPAIGN_PARAMETER_FIELDS},
        **{name: getattr(campaign, name) for name in _SCHEDULE},
        "destination_endpoint": getattr(campaign.destination_endpoint, "name", ""),
        "trace": getattr(campaign.trace, "name", ""),
        "endpoints": sorted(endpoint.name for endpoint in relations["endpoints"]),
        "test_files": sorted(str(test_file) for test_file in relations["test_files"]),
        "vantage_points": sorted(v.name for v in relations["vantage_points"])
        or [VantagePoint.LOCAL],
    }
