"""Configuration as code over the API: `GET /api/v1/campaigns/{id}/export/` and
`POST /api/v1/campaigns/import/` (docs/configuration-as-code.md), actions of the campaigns'
view set with the campaigns' own permissions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.http import HttpResponse
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import parsers, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.campaigns.configuration.export import configuration_export
from webapp.campaigns.configuration.importing import ImportOutcome, configuration_import
from webapp.campaigns.models import Campaign

# How an API import's errors name the file: "import.yaml:14: campaigns[0].name: ..."
SOURCE = "import.yaml"
YAML_TYPE = "application/yaml"
# The largest file the API takes (a file of 150 sites, 600 endpoints and 200 campaigns is
# 0.25 MB); larger ones go through `manage.py campaigns import`.
MAX_FILE_BYTES = 4 * 1024 * 1024


class YAMLTextParser(parsers.BaseParser):
    """A YAML body, handed over as text: the import reads it itself, to know its lines."""

    media_type = YAML_TYPE

    def parse(  # type: ignore[override]
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> str:
        body: bytes = stream.read(MAX_FILE_BYTES + 1) if stream is not None else b""
        if len(body) > MAX_FILE_BYTES:
            raise ParseError(
                f"larger than {MAX_FILE_BYTES // 2**20} MiB: use manage.py campaigns import"
            )
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("the YAML file must be UTF-8") from None


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"


class ConfigErrorSerializer(serializers.Serializer[Any]):
    line = serializers.IntegerField(help_text="from 1")
    path = serializers.CharField(help_text="the field, e.g. campaigns[0].parameters.read_sizes[1]")
    message = serializers.CharField()
    forbidden = serializers.BooleanField(help_text="valid, but the user may not make this change")
    text = serializers.CharField(help_text='"import.yaml:LINE: PATH: MESSAGE"')


class PlanStepSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(
        choices=["vantage point", "site", "endpoint", "test file", "campaign"]
    )
    name = serializers.CharField()
    action = serializers.ChoiceField(choices=["create", "update", "unchanged"])
    changes = serializers.ListField(
        child=serializers.CharField(), help_text="fields an update changes"
    )


class ImportOutcomeSerializer(serializers.Serializer[Any]):
    applied = serializers.BooleanField(help_text="false for a dry run and for any error")
    dry_run = serializers.BooleanField()
    plan = PlanStepSerializer(many=True)
    counts = serializers.DictField(child=serializers.IntegerField())
    # The answer's key, named like Serializer.errors (this serializer only documents it).
    errors = ConfigErrorSerializer(many=True)  # type: ignore[assignment]


def _outcome_json(outcome: ImportOutcome, *, dry_run: bool) -> dict[str, Any]:
    return {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "plan": [step.as_json() for step in outcome.plan],
        "counts": outcome.counts(),
        "errors": [error.as_json() | {"text": error.text(SOURCE)} for error in outcome.errors],
    }


class CampaignConfigurationActions:
    """The campaigns' export (any role, as reading the campaign) and import (operators; each
    object it creates or changes needs what its page needs)."""

    @extend_schema(
        responses={
            # A YAML mapping (clients, Schemathesis too, parse it as one): an object.
            (200, YAML_TYPE): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="the campaign with its sites, endpoints and vantage points "
                "(format version 1; no credential)",
            )
        }
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The campaign as a configuration file, to import elsewhere."""
        campaign: Campaign = self.get_object()  # type: ignore[attr-defined]
        response = HttpResponse(
            configuration_export(campaigns=[campaign]), content_type=f"{YAML_TYPE}; charset=utf-8"
        )
        name = slugify(campaign.name) or f"campaign-{campaign.pk}"
        response["Content-Disposition"] = f'inline; filename="{name}.yaml"'
        return response

    @extend_schema(
        request={YAML_TYPE: OpenApiTypes.STR, "text/yaml": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter(
                "dry_run", bool, description="1: validate and show the plan, change nothing"
            )
        ],
        responses={
            200: ImportOutcomeSerializer,
            400: OpenApiResponse(
                ImportOutcomeSerializer, description="errors, each at its line: nothing changed"
            ),
            403: OpenApiResponse(
                ImportOutcomeSerializer,
                description="valid, but the user may not make some of its changes: nothing changed",
            ),
        },
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        permission_classes=[IsOperatorOrReadOnly],
        parser_classes=[YAMLTextParser, TextYAMLParser],
    )
    def import_file(self, request: Request) -> Response:
        """Create and update campaigns, sites, endpoints, test files and vantage points from a
        configuration file (the body, application/yaml), matched by name; all of it or, at
        the first error anywhere, none of it."""
        if not isinstance(request.data, str):  # no body, or a form's: 415, as for JSON
            raise UnsupportedMediaType(
                request.content_type or "none",
                detail=f"send the file as the body, Content-Type {YAML_TYPE}",
            )
        dry_run = request.query_params.get("dry_run", "").lower() in ("1", "true", "yes")
        outcome = configuration_import(text=request.data, as_user=request.user, dry_run=dry_run)
        body = _outcome_json(outcome, dry_run=dry_run)
        if outcome.only_forbidden:
            return Response(body, status=status.HTTP_403_FORBIDDEN)
        if outcome.errors:
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        return Response(body)
