"""API serializers: input bounds named by field, outputs in the contract's names."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Field
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from webapp.accounts.serializers import CredentialField
from webapp.campaigns.cron import MAX_SLIP_S, slip_error
from webapp.campaigns.estimates import ScheduleCost
from webapp.campaigns.health import VantagePointHealth, WorkerSeen, vantage_points_health
from webapp.campaigns.models import (
    CAMPAIGN_PARAMETER_FIELDS,
    SHARED,
    Campaign,
    Run,
    RunParameter,
    default_operations,
)
from webapp.campaigns.run_detail import RunChartsSerializer
from webapp.campaigns.schedules import LaunchOutcome, ScheduleState
from webapp.campaigns.services import (
    MatrixPreview,
    campaign_preview,
    campaign_preview_draft,
    campaign_save,
)
from webapp.campaigns.traces import Trace
from webapp.campaigns.validation import (
    FLOAT_BOUNDS,
    FRACTION_ERROR,
    INT_BOUNDS,
    MAX_LIST,
    METHODS,
    OPERATIONS,
    PATTERNS,
    campaign_credential_refusal,
    campaign_family_errors,
    campaign_operation_errors,
    campaign_rule_errors,
    campaign_trace_errors,
    distinct,
    fraction_in_bounds,
)
from webapp.sites.credentials import (
    KIND_CHOICES,
    CredentialInfo,
    credential_change,
    credential_check,
)
from webapp.sites.file_lookup import ADLER32_HEX, TestFileFill, endpoint_file_fill
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.agent.sealing import fingerprint
from workers.engine import InvalidParams
from workers.engine.urls import ascii_url, check_credential_hosts, check_url


class SiteSerializer(serializers.ModelSerializer[Site]):
    endpoints = serializers.PrimaryKeyRelatedField[Endpoint](many=True, read_only=True)
    owner = serializers.CharField(
        source="owner.username",
        read_only=True,
        default=None,
        help_text="who changes it and its endpoints, with admins; null: admins only",
    )

    class Meta:
        model = Site
        fields = [
            "id",
            "name",
            "tier",
            "storage_system",
            "location",
            "owner",
            "source",
            "external_id",
            "endpoints",
            "created_at",
        ]


class TestFileSerializer(serializers.ModelSerializer[TestFile]):
    __test__ = False

    url = serializers.CharField(read_only=True)

    class Meta:
        model = TestFile
        fields = ["id", "path", "size", "adler32", "is_default", "url"]


class TestFileCreateSerializer(serializers.Serializer[Any]):
    """A test file to add to the endpoint in the serializer's context; a size or adler32 left
    out is asked of the storage server, one given is checked against it."""

    __test__ = False

    path = serializers.CharField(max_length=1000)
    size = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="bytes; left out: the server's"
    )
    adler32 = serializers.CharField(
        required=False, allow_blank=True, help_text="8 hex digits; left out: the server's"
    )
    is_default = serializers.BooleanField(default=False)
    fill: TestFileFill | None = None

    def validate_path(self, path: str) -> str:
        endpoint: Endpoint = self.context["endpoint"]
        try:
            check_url(endpoint.file_url(path), field="path")
        except InvalidParams as exc:
            raise serializers.ValidationError(exc.message) from None
        if endpoint.files.filter(path=path).exists():
            raise serializers.ValidationError(f"{endpoint.name} already has a test file {path}")
        return path

    def validate_adler32(self, adler32: str) -> str:
        adler32 = adler32.strip().lower()
        if adler32 and not ADLER32_HEX.fullmatch(adler32):
            raise serializers.ValidationError("8 hex digits, or left out to ask the server")
        return adler32

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self.fill = endpoint_file_fill(
            endpoint=self.context["endpoint"],
            path=attrs["path"],
            size=attrs.get("size"),
            adler32=attrs.get("adler32", ""),
        )
        errors = self.fill.errors
        if errors:
            general = api_settings.NON_FIELD_ERRORS_KEY
            raise serializers.ValidationError({k or general: v for k, v in errors.items()})
        return {**attrs, "size": self.fill.size, "adler32": self.fill.adler32}


class FoundValueSerializer(serializers.Serializer[Any]):
    value = serializers.JSONField(help_text="the stored value (null: none)")
    origin = serializers.CharField(
        help_text="where it came from (the server's answer, or typed), or why there is none"
    )


class FoundSerializer(serializers.Serializer[Any]):
    size = FoundValueSerializer()
    adler32 = FoundValueSerializer()


class TestFileAddedSerializer(TestFileSerializer):
    """The added test file and, in `found`, where its size and adler32 came from."""

    found = FoundSerializer(read_only=True)

    class Meta(TestFileSerializer.Meta):
        fields = [*TestFileSerializer.Meta.fields, "found"]


class CredentialInfoSerializer(serializers.Serializer[CredentialInfo]):
    """What may be shown of an endpoint's credential (webapp.sites.credentials)."""

    kind = serializers.ChoiceField(choices=KIND_CHOICES)
    issuer = serializers.CharField(
        required=False, allow_null=True, help_text="an oauth client's: its token URL's origin"
    )
    subject = serializers.CharField(required=False, allow_null=True)
    audience = serializers.ListField(child=serializers.CharField(), required=False)
    scopes = serializers.ListField(child=serializers.CharField(), required=False)
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="a token's or proxy's; null for an oauth client"
    )
    token_url = serializers.CharField(required=False, help_text="an oauth client's")
    client_id = serializers.CharField(required=False, help_text="an oauth client's")
    problem = serializers.CharField(
        required=False, help_text="why the stored credential does not parse"
    )


class EndpointSerializer(serializers.ModelSerializer[Endpoint]):
    """An endpoint; its credential is write-only. A PATCH of credential_kind and credential
    replaces it (credential alone: one of the stored kind; credential_kind none: removed)."""

    files = TestFileSerializer(many=True, read_only=True)
    credential = CredentialField(
        required=False,
        allow_blank=True,
        help_text="write-only: a bearer token, an X.509 proxy's PEM text, or for oauth-client "
        "a JSON object {token_url, client_id, client_secret, scope, audience}",
    )
    has_credential = serializers.SerializerMethodField()
    credential_info = serializers.SerializerMethodField()
    credential_hosts = serializers.ListField(
        child=serializers.CharField(max_length=253),
        required=False,
        max_length=100,
        help_text=Endpoint._meta.get_field("credential_hosts").help_text,
    )

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "site",
            "name",
            "protocol",
            "base_url",
            "role",
            "enabled",
            "credential_kind",
            "credential",
            "has_credential",
            "credential_info",
            "credential_hosts",
            "credential_teams",
            "scratch_path",
            "source",
            "external_id",
            "door_auth",
            "files",
            "created_at",
        ]

    def get_has_credential(self, endpoint: Endpoint) -> bool:
        return bool(endpoint.credential)

    @extend_schema_field(CredentialInfoSerializer)
    def get_credential_info(self, endpoint: Endpoint) -> CredentialInfo:
        return endpoint.credential_info()

    def validate_credential_hosts(self, value: list[str]) -> list[str]:
        try:
            return list(check_credential_hosts(value))
        except InvalidParams as exc:
            raise serializers.ValidationError(exc.message) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        protocol = attrs.get("protocol", getattr(self.instance, "protocol", None))
        base_url = attrs.get("base_url", getattr(self.instance, "base_url", ""))
        try:
            scheme = check_url(f"{base_url.rstrip('/')}/probe", field="base_url")
        except InvalidParams as exc:
            raise serializers.ValidationError({"base_url": exc.message}) from None
        if scheme != protocol:
            raise serializers.ValidationError(
                {"base_url": f"scheme {scheme!r} does not match protocol {protocol!r}"}
            )
        if "base_url" in attrs:
            attrs["base_url"] = ascii_url(base_url)  # an international host as xn--
        kind, text = credential_change(
            stored_kind=getattr(self.instance, "credential_kind", "none"),
            stored=getattr(self.instance, "credential", ""),
            kind=attrs.get("credential_kind"),
            text=attrs.get("credential"),
        )
        try:
            attrs["credential"] = credential_check(kind=kind, text=text, protocol=scheme)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        attrs["credential_kind"] = kind
        return attrs


class WorkerSeenSerializer(serializers.Serializer[WorkerSeen]):
    hostname = serializers.CharField(help_text="the worker's node name, NAME@host")
    pid = serializers.IntegerField(help_text="its main process")
    version = serializers.CharField(help_text="fedprobe's version on the worker")
    started_at = serializers.DateTimeField()
    last_seen = serializers.DateTimeField(help_text="its latest heartbeat")
    stopped_at = serializers.DateTimeField(allow_null=True, help_text="set by a warm shutdown")
    current_run = serializers.IntegerField(
        source="current_run_id", allow_null=True, help_text="the run it is measuring, if any"
    )
    live = serializers.BooleanField(
        help_text="not stopped, and heard from within stale_after_s seconds"
    )


class VantagePointHealthSerializer(serializers.Serializer[VantagePointHealth]):
    listening = serializers.BooleanField(
        help_text="whether a live worker consumes its queue: if not, its runs wait"
    )
    last_seen = serializers.DateTimeField(
        allow_null=True, help_text="the newest heartbeat of any of its workers; null: never seen"
    )
    workers = WorkerSeenSerializer(many=True, help_text="live workers first, then gone ones")
    queued_runs = serializers.IntegerField(help_text="its runs in status queued")
    broker_messages = serializers.IntegerField(
        allow_null=True,
        help_text="messages waiting in the broker on its queue; null: the broker did not answer",
    )
    stale_after_s = serializers.IntegerField(
        help_text="a worker not heard from for this long counts as gone"
    )


class VantagePointSerializer(serializers.ModelSerializer[VantagePoint]):
    queue = serializers.CharField(read_only=True)
    health = serializers.SerializerMethodField(
        help_text="workers listening on its queue and the runs waiting there (read-only)"
    )
    public_key = serializers.SerializerMethodField(
        help_text="the fingerprint (SHA256:...) of its agent's key, which run credentials are "
        "sealed to; null when no agent enrolled (read-only)"
    )

    class Meta:
        model = VantagePoint
        fields = [
            "id",
            "name",
            "location",
            "description",
            "max_parallel_runs",
            "queue",
            "health",
            "public_key",
            "enrolled_at",
            "revoked_at",
        ]
        read_only_fields = ["enrolled_at", "revoked_at"]

    def get_public_key(self, obj: VantagePoint) -> str | None:
        return fingerprint(obj.public_key) if obj.public_key else None

    @extend_schema_field(VantagePointHealthSerializer)
    def get_health(self, obj: VantagePoint) -> dict[str, Any]:
        # A list computes its page's health at once (the view's serializer context).
        health = self.context.get("health", {}).get(obj.pk)
        if health is None:
            health = vantage_points_health(vantage_points=[obj], broker=True)[obj.pk]
        return VantagePointHealthSerializer(health).data

    def validate_name(self, value: str) -> str:
        refusal = self.instance.rename_refusal(value) if self.instance is not None else None
        if refusal:
            raise serializers.ValidationError(refusal)
        return value


class DistinctListField(serializers.ListField):
    """A list whose repeated values count once (campaign.validation.distinct)."""

    def to_internal_value(self, data: Any) -> list[Any]:
        return distinct(super().to_internal_value(data))


def _list_of(child: serializers.Field[Any, Any, Any, Any], **kwargs: Any) -> serializers.ListField:
    return DistinctListField(child=child, min_length=1, max_length=MAX_LIST, **kwargs)


def _bounded(name: str, **kwargs: Any) -> serializers.IntegerField:
    low, high = INT_BOUNDS[name]
    return serializers.IntegerField(min_value=low, max_value=high, **kwargs)


RELATIONS = ("endpoints", "test_files", "vantage_points")


def _shared_parameter(parameter: RunParameter) -> serializers.Field[Any, Any, Any, Any]:
    """A parameter a campaign gives all its runs (SHARED): bounded (one of its choices),
    defaulted as the model defaults it, or null if it may be."""
    name = parameter.campaign_field
    model_field = Campaign._meta.get_field(name)
    assert isinstance(model_field, Field)
    if model_field.null:
        return _bounded(name, required=False, allow_null=True)
    if model_field.choices:
        choices = [value for value, _ in model_field.choices]
        return serializers.ChoiceField(choices=choices, default=model_field.default)
    if name in FLOAT_BOUNDS:
        low, high = FLOAT_BOUNDS[name]
        return serializers.FloatField(min_value=low, max_value=high, default=model_field.default)
    return _bounded(name, default=model_field.default)


class CampaignSerializer(serializers.ModelSerializer[Campaign]):
    operations = _list_of(
        serializers.ChoiceField(choices=OPERATIONS),
        default=default_operations,
        help_text="read (default), write (under each endpoint's scratch_path), tpc-pull and "
        "tpc-push (to destination_endpoint's scratch_path), stat, open, list, replay (the "
        "trace's recorded files, at the same paths on each endpoint)",
    )
    destination_endpoint = serializers.PrimaryKeyRelatedField(
        queryset=Endpoint.objects.all(),
        required=False,
        allow_null=True,
        help_text="where tpc-pull and tpc-push copies land (its scratch_path)",
    )
    methods = _list_of(serializers.ChoiceField(choices=METHODS))
    patterns = _list_of(serializers.ChoiceField(choices=PATTERNS))
    read_sizes = _list_of(_bounded("read_sizes"))
    fractions = _list_of(serializers.FloatField(min_value=0, max_value=1))
    clients = _list_of(_bounded("clients"))
    # The other run parameters' fields: get_fields (_shared_parameter).
    repetitions = _bounded("repetitions", default=1)
    vantage_points = serializers.PrimaryKeyRelatedField(
        many=True, queryset=VantagePoint.objects.all(), required=False
    )
    test_files = serializers.PrimaryKeyRelatedField(
        many=True, queryset=TestFile.objects.all(), required=False
    )
    owner = serializers.CharField(source="owner.username", read_only=True, default=None)
    trace = serializers.PrimaryKeyRelatedField(
        queryset=Trace.objects.all(),
        required=False,
        allow_null=True,
        help_text="replay: the recorded job (/api/v1/traces/) its runs replay, read at the "
        "same paths on each endpoint (which must hold those files)",
    )
    matrix_size = serializers.SerializerMethodField()
    planned_bytes = serializers.SerializerMethodField()
    schedule_words = serializers.CharField(
        read_only=True,
        help_text='the schedule in English ("every day at 02:00 UTC") where a short phrase is '
        "exact, else the cron; empty without a schedule",
    )
    schedule_paused = serializers.BooleanField(
        read_only=True,
        help_text="the schedule launches nothing while paused; its cron is kept (POST "
        "campaigns/{id}/pause/ and resume/)",
    )
    schedule_paused_at = serializers.DateTimeField(read_only=True, allow_null=True)
    next_launch_at = serializers.SerializerMethodField(
        help_text="the schedule's next launch (UTC, slip applied); null while paused or "
        "without a schedule"
    )
    schedule_slip_s = serializers.IntegerField(
        default=0,
        min_value=0,
        max_value=MAX_SLIP_S,
        help_text="each slot launches 0..this many seconds late, the same delay for a slot on "
        "every pass; at most the schedule's shortest interval",
    )
    next_launches = serializers.SerializerMethodField(
        help_text="the next five launch times (ISO, UTC, slip applied); empty while paused or "
        "without a schedule"
    )
    credential_warnings = serializers.SerializerMethodField(
        help_text="its endpoints' credentials that expire within FEDPROBE_CREDENTIAL_WARN_DAYS"
        " days, have expired or do not parse: each a sentence saying when its runs fail"
    )

    class Meta:
        model = Campaign
        fields = [
            "id",
            "name",
            "description",
            "owner",
            "endpoints",
            "test_files",
            "vantage_points",
            "destination_endpoint",
            *CAMPAIGN_PARAMETER_FIELDS,
            "trace",
            "schedule",
            "schedule_tz",
            "schedule_slip_s",
            "schedule_words",
            "schedule_paused",
            "schedule_paused_at",
            "next_launch_at",
            "next_launches",
            "matrix_size",
            "planned_bytes",
            "credential_warnings",
            "created_at",
        ]
        extra_kwargs = {"endpoints": {"allow_empty": False}}

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields.update({p.campaign_field: _shared_parameter(p) for p in SHARED})
        return fields

    def validate_fractions(self, value: list[float]) -> list[float]:
        if not all(fraction_in_bounds(f) for f in value):
            raise serializers.ValidationError(FRACTION_ERROR)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name in RELATIONS:
            if name in attrs:
                attrs[name] = distinct(attrs[name])
        errors = campaign_rule_errors(
            endpoints=attrs.get("endpoints") or [],
            test_files=attrs.get("test_files") or [],
            methods=attrs.get("methods", []),
        )
        if errors:
            raise serializers.ValidationError(errors)
        self._check_operations(attrs)
        self._check_credentials(attrs)
        self._check_slip(attrs)
        refusal = self._preview(attrs).refusal
        if refusal:
            raise serializers.ValidationError({"matrix": refusal})
        return attrs

    def _check_operations(self, attrs: dict[str, Any]) -> None:
        """What the operations need (scratch paths, a destination, write scopes), with the
        campaign's saved values for what a PATCH leaves out: 400 naming the field."""
        current = self.instance

        def value(name: str, default: Any) -> Any:
            if name in attrs:
                return attrs[name]
            return getattr(current, name) if current is not None else default

        endpoints = attrs.get("endpoints")
        if endpoints is None:
            endpoints = list(current.endpoints.all()) if current is not None else []
        errors = campaign_operation_errors(
            operations=value("operations", default_operations()),
            endpoints=endpoints,
            destination=value("destination_endpoint", None),
        )
        errors = errors or campaign_trace_errors(
            operations=value("operations", default_operations()), trace=value("trace", None)
        )
        errors = errors or campaign_family_errors(
            address_family=value("address_family", "any"), endpoints=endpoints
        )
        if errors:
            raise serializers.ValidationError(errors)

    def _check_credentials(self, attrs: dict[str, Any]) -> None:
        """An endpoint whose credential the campaign's owner (a new one's: who makes it) may
        not spend: 400 naming endpoints."""
        if "endpoints" not in attrs:
            return
        if self.instance is not None:
            owner = self.instance.owner
        else:
            request = self.context.get("request")
            owner = request.user if request is not None else None
        refusal = campaign_credential_refusal(endpoints=attrs["endpoints"], owner=owner)
        if refusal:
            raise serializers.ValidationError({"endpoints": refusal})
        destination = attrs.get("destination_endpoint")
        refusal = campaign_credential_refusal(
            endpoints=[destination] if destination else [], owner=owner
        )
        if refusal:
            raise serializers.ValidationError({"destination_endpoint": refusal})

    def _check_slip(self, attrs: dict[str, Any]) -> None:
        """A slip longer than the schedule's shortest interval: 400 naming schedule_slip_s."""
        current = self.instance
        schedule = attrs.get("schedule", current.schedule if current else "")
        slip_s = attrs.get("schedule_slip_s", current.schedule_slip_s if current else 0)
        message = slip_error(schedule=schedule, slip_s=slip_s)
        if message:
            raise serializers.ValidationError({"schedule_slip_s": message})

    def _preview(self, attrs: dict[str, Any]) -> MatrixPreview:
        """The matrix the campaign would have with these changes (nothing written)."""
        current = self.instance
        draft = Campaign()
        for name in (*CAMPAIGN_PARAMETER_FIELDS, "destination_endpoint", "trace"):
            if name in attrs:
                setattr(draft, name, attrs[name])
            elif current is not None:
                setattr(draft, name, getattr(current, name))
        related = {}
        for name in RELATIONS:
            if name in attrs:
                related[name] = list(attrs[name])
            else:
                related[name] = list(getattr(current, name).all()) if current else []
        return campaign_preview_draft(draft=draft, **related)

    def create(self, validated_data: dict[str, Any]) -> Campaign:
        relations = {name: validated_data.pop(name, []) for name in RELATIONS}
        return campaign_save(campaign=Campaign(**validated_data), **relations)

    def get_matrix_size(self, campaign: Campaign) -> int:
        return campaign.matrix_size()

    def get_planned_bytes(self, campaign: Campaign) -> int:
        return self._saved_preview(campaign).planned_bytes

    def get_credential_warnings(self, campaign: Campaign) -> list[str]:
        return list(self._saved_preview(campaign).credential_warnings)

    def _saved_preview(self, campaign: Campaign) -> MatrixPreview:
        """The saved campaign's preview, computed once per campaign and answer."""
        cache: dict[int, MatrixPreview] = self.__dict__.setdefault("_previews", {})
        if campaign.pk not in cache:
            cache[campaign.pk] = campaign_preview(campaign=campaign)
        return cache[campaign.pk]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_next_launch_at(self, campaign: Campaign) -> str | None:
        slot = campaign.schedule_next_slot(timezone.now())
        return None if slot is None else serializers.DateTimeField().to_representation(slot)

    @extend_schema_field(serializers.ListField(child=serializers.DateTimeField()))
    def get_next_launches(self, campaign: Campaign) -> list[str]:
        as_text = serializers.DateTimeField().to_representation
        return [as_text(launch) for launch in campaign.schedule_next_launches(timezone.now())]


class ScheduledLaunchSerializer(serializers.Serializer[LaunchOutcome]):
    """One slot the schedule launched: its runs so far by outcome, or why it launched none."""

    slot = serializers.DateTimeField(help_text="the time the cron named (UTC)")
    launched_at = serializers.DateTimeField()
    run_count = serializers.IntegerField(help_text="runs launched")
    error = serializers.CharField(help_text="why the slot launched nothing; empty if it did")
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="failed, partial or timed out")
    cancelled = serializers.IntegerField()
    active = serializers.IntegerField(help_text="still queued or running")


class ScheduleCostSerializer(serializers.Serializer[ScheduleCost]):
    """What a schedule costs: its launches, bytes read and run-minutes."""

    launches_per_night = serializers.FloatField()
    launches_per_month = serializers.IntegerField(help_text="its slots in the next 30 days")
    bytes_per_night = serializers.IntegerField()
    bytes_per_month = serializers.IntegerField()
    run_minutes_per_night = serializers.FloatField()
    run_minutes_per_month = serializers.FloatField(
        help_text="the runs' estimated time; a lower bound when unknown_runs"
    )
    unknown_runs = serializers.IntegerField(help_text="runs of a launch with no estimate")


class CampaignScheduleSerializer(serializers.Serializer[ScheduleState]):
    """A campaign's schedule: in words, paused or not, its next slot and latest launches."""

    cron = serializers.CharField(help_text="the campaign's schedule; empty: launched by hand")
    words = serializers.CharField(help_text="the cron in English where exact, else the cron")
    paused = serializers.BooleanField()
    paused_at = serializers.DateTimeField(allow_null=True)
    next_slot = serializers.DateTimeField(
        allow_null=True, help_text="the next slot (UTC); null while paused or unscheduled"
    )
    next_in = serializers.CharField(help_text='how soon, as "in 5 h"; empty without next_slot')
    next_launches = serializers.ListField(
        child=serializers.DateTimeField(),
        help_text="the next five launch times (UTC, slip applied)",
    )
    zone = serializers.CharField(help_text="the IANA time zone the cron is read in")
    cost = ScheduleCostSerializer(
        allow_null=True,
        help_text="what the schedule costs from its runs' estimates: bytes read and "
        "run-minutes per night (an average day) and per month (the next 30 days)",
    )
    launches = ScheduledLaunchSerializer(many=True, help_text="the latest slots, newest first")


class RunListSerializer(serializers.ModelSerializer[Run]):
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    vantage_point = serializers.CharField(source="vantage_point.name", read_only=True)
    # "" until the run negotiated (a queued run): DRF drops allow_blank from read-only
    # fields it builds, so the published enum would lack it.
    auth = serializers.ChoiceField(
        choices=Run._meta.get_field("auth").choices or (), allow_blank=True, read_only=True
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "campaign",
            "endpoint",
            "endpoint_name",
            "vantage_point",
            "operation",
            "method",
            "pattern",
            "read_size",
            "fraction",
            "clients",
            "address_family",
            "status",
            "trigger",
            "created_at",
            "started_at",
            "finished_at",
            "wall_s",
            "throughput_mbps",
            "latency_p50_us",
            "bytes_read",
            "auth",
            "server_version",
        ]
        read_only_fields = fields


class RunTraceSerializer(serializers.Serializer[Any]):
    """The trace a replay run replayed (the one it was launched with)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    sha256 = serializers.CharField()


class RunDetailSerializer(RunChartsSerializer):
    """The run JSON of docs/engine.md with its clients' engine records (the schema of the run
    detail; the response is built by run_json and run_charts), and the run page's charts."""

    id = serializers.IntegerField()
    campaign = serializers.IntegerField()
    status = serializers.CharField()
    trigger = serializers.CharField()
    worker = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    params = serializers.DictField()
    operation = serializers.CharField(help_text="read, write, tpc-pull, tpc-push, stat, open, list")
    address_family = serializers.CharField(
        help_text="asked for: any, 4 or 6 (a campaign's each launches one run of 4, one of 6)"
    )
    address = serializers.CharField(
        allow_null=True, help_text="the peer address the run used (an IP), null if unknown"
    )
    bytes_written = serializers.IntegerField(allow_null=True, help_text="a write's bytes")
    server_checksum = serializers.CharField(
        allow_null=True, help_text='what the server reported of a written file ("adler32:...")'
    )
    tpc = serializers.DictField(
        allow_null=True,
        help_text="a third-party copy's {markers, rate_mbps, source, destination}; null otherwise",
    )
    cleanup = serializers.DictField(
        allow_null=True,
        help_text="a lost write's or copy's cleanup of what it left on the storage: {status "
        "(pending, done, gave-up), attempts, deleted (files), error, finished_at}; null for a "
        "run that needs none",
    )
    ops_per_s = serializers.FloatField(
        allow_null=True, help_text="a metadata storm's operations per second"
    )
    trace = RunTraceSerializer(
        allow_null=True,
        help_text="a replay's trace {id, name, sha256}: the one it was launched with, "
        "whatever its campaign names since; null for other runs",
    )
    wall_s = serializers.FloatField(allow_null=True)
    open_s = serializers.FloatField(allow_null=True)
    ttfb_s = serializers.FloatField(allow_null=True)
    throughput_mbps = serializers.FloatField(allow_null=True)
    ops = serializers.IntegerField(allow_null=True)
    op_latency_us = serializers.DictField(child=serializers.FloatField(allow_null=True))
    bytes_requested = serializers.IntegerField(allow_null=True)
    bytes_read = serializers.IntegerField(allow_null=True)
    bytes_wire = serializers.IntegerField(allow_null=True)
    cpu_s = serializers.FloatField(allow_null=True)
    auth = serializers.CharField(
        allow_null=True, help_text="none, token, gsi or x509; null before the run started"
    )
    tls = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        allow_null=True,
        help_text="{version, cipher} (null values where the client library does not tell); "
        "null without TLS",
    )
    server_version = serializers.CharField(
        allow_null=True, help_text="the server's software and version, as it reported them"
    )
    client_version = serializers.CharField(
        allow_null=True,
        help_text="the client library or tool the run's clients used, and its version "
        '("xrootd 6.2.1 (Python bindings)", "xrdcp v5.5.3"); null when not recorded',
    )
    served_by = serializers.ListField(child=serializers.CharField())
    # The run JSON's key, named like Serializer.errors (this serializer only documents it).
    errors = serializers.ListField(child=serializers.DictField())  # type: ignore[assignment]
    clients = serializers.ListField(child=serializers.DictField(), help_text="engine records")
