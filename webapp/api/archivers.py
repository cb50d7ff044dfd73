"""/api/v1/archivers/: where each finished run's JSON is pushed (docs/archivers.md). Admins
only, reads included (an archiver says where the results go). The secrets (`headers`,
`username`, `password`) are write-only: accepted, never given back; a PATCH without them keeps
them. Each archiver comes with its backlog."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.accounts.roles import is_admin
from webapp.accounts.serializers import CredentialField
from webapp.archivers.models import Archiver
from webapp.archivers.selectors import ArchiverBacklog, backlog
from webapp.archivers.services import archiver_save
from webapp.core.parsers import PARSER_CLASSES


class IsAdmin(BasePermission):
    message = "only an admin may see or change archivers"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return is_admin(request.user)


class HeadersField(serializers.DictField):
    """HTTP headers: accepted, never given back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(trim_whitespace=False), **kwargs)


class BacklogSerializer(serializers.Serializer[ArchiverBacklog]):
    pending = serializers.IntegerField(help_text="runs queued for it, not yet delivered")
    oldest_pending_s = serializers.FloatField(allow_null=True)
    failed = serializers.IntegerField(help_text="given up (the admin shows their errors)")
    last_delivered_at = serializers.DateTimeField(allow_null=True)


class ArchiverSerializer(serializers.ModelSerializer[Archiver]):
    """An archiver: `http` (url; headers) or `amqp` (url, exchange, routing_key; username,
    password); write-only secrets, their presence shown by has_headers/has_credentials."""

    headers = HeadersField(
        write_only=True, required=False, help_text='http: {"Authorization": "Bearer ..."}'
    )
    username = CredentialField(required=False, allow_blank=True, max_length=500)
    password = CredentialField(required=False, allow_blank=True, max_length=2000)
    retry_policy = serializers.JSONField(required=False)
    has_headers = serializers.SerializerMethodField()
    has_credentials = serializers.SerializerMethodField()
    backlog = serializers.SerializerMethodField()
    _backlogs: dict[str, ArchiverBacklog] = {}  # replaced on the instance, never changed

    class Meta:
        model = Archiver
        fields = [
            "id",
            "name",
            "kind",
            "enabled",
            "url",
            "headers",
            "has_headers",
            "exchange",
            "routing_key",
            "username",
            "password",
            "has_credentials",
            "campaign",
            "site",
            "retry_policy",
            "ttl_s",
            "timeout_s",
            "archive_from",
            "created_at",
            "backlog",
        ]
        read_only_fields = ["id", "archive_from", "created_at"]
        # The service checks names (unique), URLs (the egress policy) and bounds.
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}

    def get_has_headers(self, archiver: Archiver) -> bool:
        return bool(archiver.headers)

    def get_has_credentials(self, archiver: Archiver) -> bool:
        return bool(archiver.username or archiver.password)

    @extend_schema_field(BacklogSerializer)
    def get_backlog(self, archiver: Archiver) -> dict[str, Any]:
        # One query for a whole list (the list's rows share this serializer).
        if archiver.name not in self._backlogs:
            self._backlogs = {row.name: row for row in backlog()}
        return dict(BacklogSerializer(self._backlogs[archiver.name]).data)

    def save(self, **kwargs: Any) -> Archiver:
        values = {**self.validated_data, **kwargs}
        try:
            self.instance = archiver_save(values=values, now=timezone.now(), archiver=self.instance)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return self.instance


class ArchiverViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = ArchiverSerializer
    permission_classes = [IsAdmin]
    parser_classes = PARSER_CLASSES
    queryset = Archiver.objects.all()
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
