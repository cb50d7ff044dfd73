"""The advice over the API (docs/advice.md): an endpoint's and a site's statements, and the
creation (not the launch) of the campaign a "too thin" statement suggests."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.advice.selectors import endpoint_advice, questions, site_advice
from webapp.advice.statements import QUESTIONS
from webapp.advice.suggestions import SUGGESTED_KNEES, create_suggested_campaign
from webapp.api.serializers import CampaignSerializer
from webapp.campaigns.validation import MAX_ID
from webapp.core.parsers import PARSER_CLASSES
from webapp.sites.models import Endpoint, Site, VantagePoint


class StatementSerializer(serializers.Serializer[dict[str, Any]]):
    """One statement (webapp/advice/statements.py), for the schema."""

    question = serializers.ChoiceField(choices=QUESTIONS)
    verdict = serializers.CharField(
        help_text="one word per question (crossover: crossover|copy-first|read-directly|"
        "no-difference; knee: knee|scales|flat; latency-hiding: pays-off|no-gain; read-ahead: "
        "helps|only-moves-bytes|no-difference; cache: helps|no-gain; redirector: cheap|costly|"
        "no-difference; tpc-direction: pull-faster|push-faster|no-difference; address-family: "
        "ipv6-slower|ipv4-slower|no-difference), or too-thin"
    )
    text = serializers.CharField(help_text="the sentence a user acts on")
    endpoint = serializers.IntegerField()
    vantage_point = serializers.IntegerField(
        allow_null=True, help_text="null: the local vantage point, not made yet"
    )
    protocol = serializers.CharField()
    scope = serializers.DictField(
        help_text="what the statement is about (read size, ...); a knee's `operation` says "
        "whose rate it is: read, write, stat, open or list"
    )
    value = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()
    interval = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95% bootstrap interval over repetitions and clients: [low, high]",
    )
    model_prediction = serializers.FloatField(allow_null=True)
    model_text = serializers.CharField(help_text="the model beside the runs, and disagreements")
    model_agrees = serializers.BooleanField(
        allow_null=True,
        help_text="whether the model's prediction agrees with the runs (within 25%); null when "
        "the model predicts nothing here",
    )
    evidence = serializers.ListField(child=serializers.IntegerField(), help_text="run ids")
    measured_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(help_text="older than FEDPROBE_ADVICE_MAX_AGE_DAYS")
    enough_data = serializers.BooleanField()
    suggested_campaign = serializers.DictField(
        allow_null=True,
        help_text="when too thin: the campaign that would collect what is missing, with "
        "runs, estimated_duration_s and estimated_bytes",
    )


class AdviceSerializer(serializers.Serializer[dict[str, Any]]):
    statements = StatementSerializer(many=True)


class SuggestedCampaignRequestSerializer(serializers.Serializer[dict[str, Any]]):
    question = serializers.ChoiceField(choices=QUESTIONS)
    vantage_point = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="its id; none: the local vantage point",
    )
    operation = serializers.ChoiceField(
        choices=SUGGESTED_KNEES,
        default="read",
        help_text="the knee's: of reads (the default), writes or a metadata storm; the other "
        "questions are of one kind each",
    )


def vantage_point_of(value: str | None) -> VantagePoint | None:
    """The vantage point a query names by id or name; 400 naming it when there is none."""
    if value is None or value == "":
        return None
    if "\x00" in value:  # PostgreSQL refuses NUL in a query's text
        raise ValidationError({"vantage_point": ["no vantage point with a NUL character"]})
    point = None
    if value.isascii() and value.isdigit() and int(value) <= MAX_ID:
        point = VantagePoint.objects.filter(pk=int(value)).first()
    if point is None:
        point = VantagePoint.objects.filter(name=value).first()
    if point is None:
        raise ValidationError({"vantage_point": [f"no vantage point {value!r}"]})
    return point


class EndpointAdviceAPIView(APIView):
    """The endpoint's advice: every question's statement per vantage point that measured it
    (or the one named)."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "vantage_point", str, description="a vantage point's id or name: only its advice"
            )
        ],
        responses={
            200: AdviceSerializer,
            400: OpenApiResponse(description="{vantage_point: [message]}: no such vantage point"),
            404: OpenApiResponse(description="no such endpoint"),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        endpoint = get_object_or_404(Endpoint, pk=pk)
        point = vantage_point_of(request.query_params.get("vantage_point"))
        statements = endpoint_advice(endpoint, point)
        return Response({"statements": [s.to_json() for s in statements]})


class SiteAdviceAPIView(APIView):
    """The site's advice: each enabled endpoint's (a protocol each), per vantage point."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        responses={200: AdviceSerializer, 404: OpenApiResponse(description="no such site")}
    )
    def get(self, request: Request, pk: int) -> Response:
        site = get_object_or_404(Site, pk=pk)
        return Response({"statements": [s.to_json() for s in site_advice(site)]})


class SuggestedCampaignAPIView(APIView):
    """Create (not launch) the campaign the advice suggests to answer a question on the
    endpoint from a vantage point; the campaign is the advice's, not fields sent here."""

    permission_classes = [IsOperatorOrReadOnly]
    parser_classes = PARSER_CLASSES

    @extend_schema(
        request=SuggestedCampaignRequestSerializer,
        responses={
            201: CampaignSerializer,
            400: OpenApiResponse(description="{field: [message]}: nothing created"),
            403: OpenApiResponse(description="not an operator or admin: nothing created"),
            404: OpenApiResponse(description="no such endpoint"),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        endpoint = get_object_or_404(Endpoint, pk=pk)
        asked = SuggestedCampaignRequestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        question = asked.validated_data["question"]
        if question not in questions(endpoint):
            raise ValidationError(
                {"question": [f"not asked of {endpoint.name} (a {endpoint.role} endpoint)"]}
            )
        raw = asked.validated_data.get("vantage_point")
        point = VantagePoint.local_unsaved() if raw is None else vantage_point_of(str(raw))
        assert point is not None
        try:
            campaign = create_suggested_campaign(
                question=question,
                endpoint=endpoint,
                vantage_point=point,
                owner=cast(User, request.user),
                operation=asked.validated_data["operation"],
            )
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        body = CampaignSerializer(campaign, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)
