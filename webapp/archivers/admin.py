"""The admin's archiver pages: made and changed through archiver_save (the egress policy, the
retry policy, write-only secrets: an empty secret field keeps the saved one), listed with
their backlog; deliveries read-only, failed ones findable and sent again by an action."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from webapp.archivers.models import ArchiveDelivery, Archiver
from webapp.archivers.selectors import with_backlog
from webapp.archivers.services import FIELDS, SECRETS, archiver_prepare

KEEP = "never shown again; left empty: kept as it is"


class ArchiverForm(forms.ModelForm):  # type: ignore[type-arg]
    """The model's fields; `headers` as "Name: value" lines, write-only like the others."""

    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=f"http: one header a line, Name: value (Authorization: Bearer ...); {KEEP}",
    )
    retry_policy = forms.JSONField(
        help_text='[{"attempts": 3, "wait_s": 60}, {"attempts": 6, "wait_s": 3600}]: after a '
        "failed attempt, N more tries S seconds apart, step after step; then given up"
    )

    class Meta:
        model = Archiver
        fields = list(FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["headers"] = ""  # write-only: never rendered back
        for name in ("username", "password"):
            self.fields[name].help_text = f"amqp: {KEEP}"

    def clean_headers(self) -> dict[str, str] | None:
        lines = [line for line in self.cleaned_data["headers"].splitlines() if line.strip()]
        if not lines:
            return None if self.instance.pk else {}
        headers: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValidationError("one header a line, Name: value")
            headers[name.strip()] = value.strip()
        return headers

    def _post_clean(self) -> None:
        """archiver_prepare checks the values (the model's own checks would see the lines)."""
        if self.errors:
            return  # a field's own error first (its value is not in cleaned_data)
        values = {name: self.cleaned_data.get(name) for name in FIELDS if name in self.fields}
        editing = self.instance.pk is not None
        for name in SECRETS:
            if editing and not values.get(name):
                values[name] = None  # write-only: empty keeps it
        try:
            self.instance = archiver_prepare(
                values=values, now=timezone.now(), archiver=self.instance if editing else None
            )
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                self.add_error(name if name in self.fields else None, errors)

    def save(self, commit: bool = True) -> Archiver:
        self.save_m2m = lambda: None  # type: ignore[method-assign]  # no many-to-many fields
        archiver: Archiver = self.instance
        if commit:
            archiver.save()
        return archiver


@admin.register(Archiver)
class ArchiverAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = ArchiverForm
    list_display = [
        "name", "kind", "enabled", "destination", "campaign", "site", "pending",
        "oldest_pending", "failed",
    ]  # fmt: skip
    list_filter = ["kind", "enabled"]
    readonly_fields = ["archive_from", "scanned_to", "created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Archiver]:
        rows: QuerySet[Archiver] = super().get_queryset(request)
        return with_backlog(rows.select_related("campaign", "site"))

    @admin.display(description="where")
    def destination(self, archiver: Archiver) -> str:
        if archiver.kind == Archiver.Kind.AMQP:
            return f"{archiver.url} exchange {archiver.exchange or '(default)'}"
        return archiver.url

    @admin.display(description="pending", ordering="pending")
    def pending(self, archiver: Any) -> int:
        return int(archiver.pending)

    @admin.display(description="oldest pending", ordering="oldest_pending_at")
    def oldest_pending(self, archiver: Any) -> str:
        if archiver.oldest_pending_at is None:
            return "-"
        return f"{(timezone.now() - archiver.oldest_pending_at).total_seconds():.0f} s ago"

    @admin.display(description="failed", ordering="failed")
    def failed(self, archiver: Any) -> int:
        return int(archiver.failed)


@admin.action(description="Send again (queued now: attempts and time to live from zero)")
def send_again(admin_view: Any, request: HttpRequest, rows: QuerySet[ArchiveDelivery]) -> None:
    # Queued again now: with its old created_at, one given up after its ttl would be given up
    # again at its first failed attempt.
    now = timezone.now()
    count = rows.exclude(status=ArchiveDelivery.Status.SENDING).update(
        status=ArchiveDelivery.Status.PENDING, attempts=0, created_at=now, next_attempt_at=now
    )
    messages.info(request, f"{count} deliveries will be sent again by the next pass")


_DELIVERY_FIELDS = (
    "archiver",
    "run",
    "status",
    "attempts",
    "created_at",
    "next_attempt_at",
    "lease_until",
    "delivered_at",
    "last_error",
)


@admin.register(ArchiveDelivery)
class ArchiveDeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "status", "archiver", "run", "attempts", "created_at", "last_error"]
    list_filter = ["status", "archiver"]
    list_select_related = ["archiver", "run"]  # both shown on each row
    fields = readonly_fields = _DELIVERY_FIELDS
    actions = [send_again]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None  # the list's action; a delivery's fields are the pump's
