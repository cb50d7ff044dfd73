"""Where data lives (sites, endpoints, test files) and where it is measured from."""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse

from webapp.accounts.crypto import EncryptedTextField
from webapp.accounts.roles import User, can_edit, can_operate, is_admin
from webapp.sites.credentials import (
    KIND_CHOICES,
    CredentialInfo,
    credential_check,
    credential_info,
    endpoint_run_credential,
)
from workers.engine.credentials import resolve_ca_dir
from workers.engine.egress import EgressPolicy, literal_refusal
from workers.engine.errors import InvalidParams
from workers.engine.oauth import TOKEN_REQUEST_TIMEOUT_S
from workers.engine.params import RunParams
from workers.engine.protocols import XROOT
from workers.engine.urls import (
    SCHEMES,
    ascii_url,
    check_credential_hosts,
    check_file_roots,
    check_url,
)

_NAME = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", "letters, digits, '.', '_' and '-'")
_ADLER32 = RegexValidator(r"^[0-9a-f]{8}$", "8 lowercase hex digits")


def validate_base_url(value: str) -> None:
    """Refuse a base URL no endpoint may have, whatever its protocol: one carrying a password
    (it would be shown wherever the URL is; the credential is stored encrypted, never shown),
    a file:// path outside FEDPROBE_FILE_ROOTS (after resolving symlinks; workers check it again
    before reading), or a host written as an address workers never connect to
    (169.254.169.254, also as 2852039166 or ::ffff:169.254.169.254). Names are not resolved
    here: DNS may answer the worker differently, and the worker's check decides."""
    try:
        parts = urlsplit(value)
        host, password = parts.hostname, parts.password
    except ValueError:
        return  # not a URL: clean() says so
    if password is not None:
        raise ValidationError(
            "must not carry a password (user:password@): put secrets in the credential",
            code="password",
        )
    if parts.scheme.lower() == "file":
        try:
            check_file_roots(value, tuple(settings.FEDPROBE_FILE_ROOTS), field="base_url")
        except InvalidParams as exc:
            raise ValidationError(exc.message, code="file_roots") from None
    why = literal_refusal(host) if host else None
    if why is not None:
        raise ValidationError(f"refused by egress policy: {why}", code="egress")


# The name the migrations refer to.
validate_base_url_egress = validate_base_url


def _host_list(value: object) -> list[str]:
    """credential_hosts as stored: a JSON list of texts (the admin could give any JSON)."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise InvalidParams("credential_hosts", "a list of host names, addresses or .domain suffixes")


class Source(models.TextChoices):
    """Where a site, endpoint or downtime came from: typed here (blank), or imported from a
    registry by `manage.py topology import` / `downtimes import` (docs/topology.md). An import
    changes only rows of its own source, found again by their `external_id`."""

    HAND = "", "made here"
    GOCDB = "gocdb", "GOCDB"
    CRIC = "cric", "CRIC"


class SiteQuerySet(models.QuerySet["Site"]):
    def editable_by(self, user: User | None) -> SiteQuerySet:
        """The sites `user` may change and add endpoints to (Site.editable_by)."""
        if is_admin(user):
            return self
        if can_operate(user) and user is not None:
            return self.filter(owner_id=user.pk)
        return self.none()


class Site(models.Model):
    """A storage site of the federation (a WLCG site, or a site of the lab)."""

    name = models.CharField(max_length=100, unique=True)
    tier = models.CharField(max_length=20, blank=True, help_text="T0, T1, T2, T3, ...")
    storage_system = models.CharField(max_length=50, blank=True, help_text="dCache, EOS, ...")
    location = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Imported rows (webapp.sites.topology): the registry and its name for the site; a re-import
    # updates them, and never a site made here (source blank).
    source = models.CharField(max_length=10, choices=Source.choices, blank=True, editable=False)
    external_id = models.CharField(max_length=200, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SiteQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"],
                condition=~models.Q(source=""),
                name="site_unique_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("sites:site-detail", args=[self.pk])

    def editable_by(self, user: User | None) -> bool:
        """Its owner or an admin changes it and its endpoints; a site without an owner (made
        before sites had one, or by `lab register`) is an admin's."""
        return can_edit(user, self)

    @property
    def protocols(self) -> list[str]:
        """The protocols of its endpoints (use with prefetch_related("endpoints"))."""
        return sorted({endpoint.protocol for endpoint in self.endpoints.all()})


class DoorAuth(models.TextChoices):
    """The authentication a registry says an endpoint's door takes (blank: it does not say)."""

    UNKNOWN = "", "not said"
    X509 = "x509", "X.509 proxy"
    X509_TOKEN = "x509+token", "X.509 proxy or bearer token"


class Endpoint(models.Model):
    """One door into a site's storage: a protocol and a base URL, in one role."""

    class Protocol(models.TextChoices):
        ROOT = "root", "root (XRootD)"
        ROOTS = "roots", "roots (XRootD over TLS)"
        HTTP = "http", "http"
        HTTPS = "https", "https"
        DAVS = "davs", "davs (WebDAV)"
        GSIFTP = "gsiftp", "gsiftp (GridFTP)"
        FTP = "ftp", "ftp (GridFTP, anonymous)"
        FILE = "file", "file (local)"

    class Role(models.TextChoices):
        DATA = "data", "data server"
        REDIRECTOR = "redirector", "redirector"
        CACHE = "cache", "cache"

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=100, unique=True, validators=[_NAME])
    protocol = models.CharField(max_length=10, choices=Protocol.choices)
    base_url = models.CharField(max_length=500, validators=[validate_base_url])
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.DATA)
    enabled = models.BooleanField(default=True)
    # What the endpoint is presented (webapp.sites.credentials): a bearer token, an oauth
    # client's JSON or an X.509 proxy, encrypted at rest with FEDPROBE_CREDENTIAL_KEY.
    credential_kind = models.CharField(max_length=12, choices=KIND_CHOICES, default="none")
    credential = EncryptedTextField(blank=True)
    # The hosts the credential may also be presented to when the endpoint redirects there
    # (https/davs: workers/engine/httpclient.py token_may_go; root(s)/gsiftp:
    # workers/engine/credential_scope.py), as workers/engine/urls.check_credential_hosts
    # writes them; empty: its own host (at its port) only.
    credential_hosts = models.JSONField(
        default=list,
        blank=True,
        help_text="host names, addresses or .domain suffixes (never a public suffix) a "
        "redirection may take the credential to; empty: the endpoint's own host only",
    )
    # Whose campaigns may spend the credential besides its site's owner's and admins'
    # (credential_usable_by; docs/roles.md).
    credential_teams = models.ManyToManyField(
        "accounts.Team",
        blank=True,
        related_name="credentials",
        help_text="teams whose members' campaigns may use the endpoint's credential",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Imported rows (webapp.sites.topology): the registry, its id of the door, and the
    # authentication the registry says the door takes (never a credential: that stays the
    # operator's to set); shown on the endpoint's page and in the API.
    source = models.CharField(max_length=10, choices=Source.choices, blank=True, editable=False)
    external_id = models.CharField(max_length=200, blank=True, editable=False)
    door_auth = models.CharField(
        max_length=12, choices=DoorAuth.choices, blank=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"],
                condition=~models.Q(source=""),
                name="endpoint_unique_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("sites:endpoint-detail", args=[self.pk])

    def editable_by(self, user: User | None) -> bool:
        """An endpoint is changed by whoever may change its site (not by who made it: an
        operator adds no endpoint to another's site)."""
        return self.site.editable_by(user)

    def credential_usable_by(self, user: User | None) -> bool:
        """Whether runs of `user`'s (their campaigns, their Test connection) may present the
        endpoint's credential: its site's owner, a member of a team it is shared with, or an
        admin; nobody else (None included). True when it has none."""
        if self.credential_kind == "none" or not self.credential:
            return True
        if is_admin(user) or self.site.editable_by(user):
            return True
        return user is not None and any(t.has_member(user) for t in self.credential_teams.all())

    def credential_refusal(self, user: User | None, doing: str) -> str:
        """Why `user` may not do `doing` with the endpoint's credential ("" when they may)."""
        if self.credential_usable_by(user):
            return ""
        owner = self.site.owner.get_username() if self.site.owner else "an admin"
        teams = sorted(team.name for team in self.credential_teams.all())
        shared = f", members of {', '.join(teams)}" if teams else ""
        return (
            f"{doing} uses the credential of endpoint {self.name}: only runs of its site's "
            f"owner ({owner}){shared} or an admin may"
        )

    def clean(self) -> None:
        """The base URL must be one the engine accepts, in the endpoint's protocol, and the
        credential one of its kind that the protocol can carry (normalized here)."""
        errors: dict[str, str] = {}
        try:
            self.credential = credential_check(
                kind=self.credential_kind, text=self.credential or "", protocol=self.protocol
            )
        except ValidationError as exc:
            errors.update({field: messages[0] for field, messages in exc.message_dict.items()})
        try:
            self.credential_hosts = list(check_credential_hosts(_host_list(self.credential_hosts)))
        except InvalidParams as exc:
            errors["credential_hosts"] = exc.message
        if self.base_url and self.protocol:  # else the field's own "required" error says it
            try:
                scheme = check_url(f"{self.base_url.rstrip('/')}/probe", field="base_url")
            except InvalidParams as exc:
                errors["base_url"] = exc.message
            else:
                if scheme != self.protocol:
                    errors["base_url"] = (
                        f"scheme {scheme!r} does not match protocol {self.protocol!r}"
                    )
                self.base_url = ascii_url(self.base_url)  # an international host as xn--
        if errors:
            raise ValidationError(errors)

    def file_url(self, path: str) -> str:
        """The URL of `path` on this endpoint (XRootD paths get the double slash)."""
        base = self.base_url.rstrip("/")
        if self.protocol in XROOT.scheme_names:
            return f"{base}//{path.lstrip('/')}"
        return f"{base}/{path.lstrip('/')}"

    def credential_info(self) -> CredentialInfo:
        """What may be shown of the credential: its kind, and the claims, subject, issuer and
        expiry it carries (an oauth client: its issuer, client id, scope and audience)."""
        return credential_info(kind=self.credential_kind, text=self.credential or "")

    @property
    def default_file(self) -> TestFile | None:
        return self.files.filter(is_default=True).first() or self.files.first()

    def engine_params(self, measured: RunParams) -> RunParams:
        """`measured` (a run's parameters and URLs on this endpoint) with what this host adds:
        its file roots, egress policy and CA folder, and the endpoint's credential (an oauth
        client's: a token from this process's cache, valid for the run's timeout).

        Raises InvalidParams for a stored credential that does not parse, and ProbeError when
        an oauth client's issuer gives no token.
        """
        egress = EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW)
        ca_dir = resolve_ca_dir(settings.FEDPROBE_CA_DIR)
        started = time.monotonic()
        credential = endpoint_run_credential(
            self,
            egress=egress,
            ca_dir=ca_dir,
            valid_for_s=float(measured.timeout_s or 0),
            # The run's deadline covers its token request (the engine counts what it took).
            time_s=float(measured.timeout_s or TOKEN_REQUEST_TIMEOUT_S),
        )
        return dataclasses.replace(
            measured,
            file_roots=tuple(settings.FEDPROBE_FILE_ROOTS),
            egress=egress,
            credential=credential,
            ca_dir=ca_dir,
            credential_hosts=tuple(self.credential_hosts),
            credential_s=round(time.monotonic() - started, 3),
        )


assert {choice.value for choice in Endpoint.Protocol} <= SCHEMES


class TestFile(models.Model):
    """A file on an endpoint that probes read, with its known size and adler32."""

    __test__ = False  # not a pytest test class

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1000)
    size = models.BigIntegerField(help_text="bytes")
    adler32 = models.CharField(max_length=8, blank=True, validators=[_ADLER32])
    is_default = models.BooleanField(default=False)

    class Meta:
        ordering = ["endpoint__name", "path"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "path"], name="testfile_unique_path")
        ]

    def __str__(self) -> str:
        return f"{self.endpoint.name}:{self.path}"

    @property
    def url(self) -> str:
        return self.endpoint.file_url(self.path)


# The most runs a vantage point may measure at once (VantagePoint.max_parallel_runs).
MAX_PARALLEL_RUNS = 32


class VantagePoint(models.Model):
    """A place measurements are made from: the workers that consume its Celery queue."""

    # The name of the web host's own worker's (`bin/run`, compose): campaigns that name
    # none measure from it, so it is never renamed nor deleted through the pages or the API.
    LOCAL: ClassVar[str] = "local"

    name = models.CharField(max_length=50, unique=True, validators=[_NAME])
    location = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    # Runs of different endpoints measured side by side from here, at most (never two of one
    # endpoint): its workers' claims hold it (campaigns.services.run_claim), whatever their
    # --concurrency and however many hosts they run on.
    max_parallel_runs = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_PARALLEL_RUNS)],
        help_text=f"runs of different endpoints measured at once from here (1-{MAX_PARALLEL_RUNS});"
        " never two of one endpoint",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A remote vantage point's agent (workers/agent; docs/vantage-points.md): its X25519
    # public key (base64), which run credentials are sealed to; when it enrolled and, if so,
    # when it was revoked. Only digests of its tokens are kept: the one-time enrolment token
    # an admin hands out (until it expires) and the agent token it authenticates with.
    public_key = models.CharField(max_length=64, blank=True, editable=False)
    enrolled_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    enrolment_token_digest = models.CharField(max_length=64, blank=True, editable=False)
    enrolment_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    agent_token_digest = models.CharField(max_length=64, blank=True, editable=False)
    # Its account on the broker (RabbitMQ), which reaches only its own queue.
    broker_user = models.CharField(max_length=100, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(fields=["agent_token_digest"], name="vantage_agent_token"),
            models.Index(fields=["enrolment_token_digest"], name="vantage_enrolment_token"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_remote(self) -> bool:
        """Measured from by an enrolled agent (sealed credentials, no database), not by a
        worker of the deployment's own."""
        return self.enrolled_at is not None

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def local(cls) -> VantagePoint:
        """The vantage point of this host, used when a campaign names none (made if missing)."""
        vantage_point, _ = cls.objects.get_or_create(
            name=cls.LOCAL, defaults={"location": "this host"}
        )
        return vantage_point

    @classmethod
    def local_unsaved(cls) -> VantagePoint:
        """The local vantage point if saved, else an unsaved one (a preview writes nothing)."""
        return cls.objects.filter(name=cls.LOCAL).first() or cls(name=cls.LOCAL)

    @property
    def is_local(self) -> bool:
        return self.name == self.LOCAL

    def editable_by(self, user: User | None) -> bool:
        """Admins only: a vantage point names the queue that deployed workers consume, and
        only whoever deploys them may say so."""
        return is_admin(user)

    def rename_refusal(self, name: str) -> str | None:
        """Why this (saved) vantage point may not be renamed to `name`, or None."""
        if self.pk is not None and self.is_remote and not self.is_revoked and name != self.name:
            return (
                f"{self.name} has an enrolled agent, whose broker account reaches "
                f"{self.queue} only: enrol a new vantage point under the new name instead"
            )
        if self.pk is not None and self.is_local and name != self.LOCAL:
            return (
                f"the built-in vantage point {self.LOCAL!r} cannot be renamed: "
                f"campaigns without a vantage point are queued to vantage.{self.LOCAL}"
            )
        return None

    def delete_refusal(self) -> str | None:
        """Why this vantage point may not be deleted, or None."""
        if self.is_remote and not self.is_revoked:
            return (
                f"{self.name} has an enrolled agent: revoke it first "
                f"(python manage.py vantage revoke {self.name})"
            )
        if self.is_local:
            return (
                f"the built-in vantage point {self.LOCAL!r} cannot be deleted: "
                f"campaigns without a vantage point are queued to vantage.{self.LOCAL}"
            )
        return None

    @property
    def queue(self) -> str:
        """Workers started with `celery -A webapp worker -Q vantage.NAME` measure from here."""
        return f"vantage.{self.name}"


class WorkerHeartbeat(models.Model):
    """A Celery worker consuming one queue, as it last reported itself (webapp.campaigns.health)."""

    hostname = models.CharField(max_length=200, help_text="the worker's node name, NAME@host")
    queue = models.CharField(max_length=200, help_text="vantage.NAME, or control")
    pid = models.PositiveIntegerField()
    version = models.CharField(max_length=50, blank=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True, help_text="a warm shutdown's end")
    current_run_id = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hostname", "queue"], name="worker_hostname_queue")
        ]
        indexes = [models.Index(fields=["queue", "last_seen"], name="worker_queue_seen")]

    def __str__(self) -> str:
        return f"{self.hostname} on {self.queue}"


class Downtime(models.Model):
    """A declared downtime of a site or one of its endpoints, in the shape of GOCDB's: while
    it lasts nothing alerts on what it covers, and an outage's time is no failure of the site
    (docs/watch.md#downtimes)."""

    class Severity(models.TextChoices):
        OUTAGE = "outage"  # the service is down: its runs do not count for or against it
        WARNING = "warning"  # at risk: runs count, alerts wait

    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.CASCADE, related_name="downtimes"
    )
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="downtimes"
    )
    start = models.DateTimeField()
    end = models.DateTimeField()
    severity = models.CharField(max_length=10, choices=Severity.choices)
    scheduled = models.BooleanField(help_text="declared ahead of time (GOCDB's SCHEDULED)")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Imported from GOCDB (webapp.sites.downtime_import): its PRIMARY_KEY; one GOCDB downtime
    # of several services is one row per endpoint (or site) it covers here.
    source = models.CharField(max_length=10, choices=Source.choices, blank=True, editable=False)
    external_id = models.CharField(max_length=200, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-start", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id", "endpoint"],
                condition=~models.Q(source="") & models.Q(endpoint__isnull=False),
                name="downtime_unique_external_endpoint",
            ),
            models.UniqueConstraint(
                fields=["source", "external_id", "site"],
                condition=~models.Q(source="") & models.Q(site__isnull=False),
                name="downtime_unique_external_site",
            ),
            models.CheckConstraint(
                condition=models.Q(end__gt=models.F("start")), name="downtime_ends_after_start"
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(site__isnull=False, endpoint__isnull=True)
                    | models.Q(site__isnull=True, endpoint__isnull=False)
                ),
                name="downtime_site_or_endpoint",
            ),
        ]
        indexes = [models.Index(fields=["end", "start"], name="downtime_window_idx")]

    def __str__(self) -> str:
        what = f"endpoint {self.endpoint_id}" if self.endpoint_id else f"site {self.site_id}"
        return f"{self.severity} of {what} {self.start:%Y-%m-%d %H:%M}-{self.end:%Y-%m-%d %H:%M}"
