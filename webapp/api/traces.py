"""/api/v1/traces/: recorded jobs to replay (webapp/campaigns/traces.py). Viewers read their
summaries; operators upload (the CSV as text, checked by the engine's parser: a bad line is a
400 naming `trace` and the line) and delete (their own, or an admin any) one no campaign
replays."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.accounts.roles import CanEditObject
from webapp.campaigns.traces import (
    MAX_NAME,
    MAX_TRACE_TEXT,
    Trace,
    TraceRefused,
    trace_create,
    trace_delete,
)
from webapp.core.parsers import PARSER_CLASSES


class TraceSerializer(serializers.ModelSerializer[Trace]):
    name = serializers.CharField(max_length=MAX_NAME, help_text="unique")
    trace = serializers.CharField(
        write_only=True,
        trim_whitespace=False,
        help_text="the XRootD client recorder's CSV (XRD_RECORDERPATH), at most 4 MiB",
    )
    owner = serializers.CharField(source="owner.username", read_only=True, default=None)

    class Meta:
        model = Trace
        fields = [
            "id",
            "name",
            "trace",
            "owner",
            "sha256",
            "size",
            "files",
            "operations",
            "bytes_read",
            "duration_s",
            "left_out",
            "created_at",
        ]
        read_only_fields = [
            "sha256",
            "size",
            "files",
            "operations",
            "bytes_read",
            "duration_s",
            "left_out",
            "created_at",
        ]


class TraceViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Traces: `files` are the recorded remote files' paths, in the order the job first
    opened them (a replay reads them at the same paths on each endpoint of its campaign);
    `operations`, `bytes_read` and `duration_s` what the engine replays. Upload: 400 naming
    `name` (taken) or `trace` (over 4 MiB, a bad line, the same CSV stored already). Delete:
    400 naming `trace` while a campaign replays it."""

    queryset = Trace.objects.select_related("owner")
    serializer_class = TraceSerializer
    permission_classes = [CanEditObject]
    parser_classes = PARSER_CLASSES
    http_method_names = ["get", "post", "delete", "head", "options"]

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            body = request.data
        except RequestDataTooBig:  # far over the limit (DATA_UPLOAD_MAX_MEMORY_SIZE)
            raise ValidationError({"trace": [f"more than {MAX_TRACE_TEXT} bytes"]}) from None
        serializer = self.get_serializer(data=body)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            trace = trace_create(
                name=data["name"],
                text=data["trace"],
                owner=request.user if isinstance(request.user, User) else None,
            )
        except TraceRefused as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(self.get_serializer(trace).data, status=201)

    def perform_destroy(self, instance: Trace) -> None:
        try:
            trace_delete(trace=instance)
        except TraceRefused as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
