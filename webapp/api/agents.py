"""The API a remote vantage point's agent speaks (docs/vantage-points.md#the-agent-api):
enrolment with a one-time token, then `Authorization: Agent TOKEN` for claiming, reporting
and heartbeats. Agents are not users: these views take no session and no user token, and
user views take no agent token.
"""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, NotFound, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from webapp.campaigns.agents import (
    MalformedReport,
    UnknownRun,
    agent_claim,
    agent_cleanup_report,
    agent_cleanups,
    agent_failure,
    agent_heartbeat,
    agent_progress,
    agent_result,
    agent_trace,
)
from webapp.campaigns.services import CLAIM_RETRY_S, RunMustWait
from webapp.sites.broker_accounts import BrokerAccountsUnavailable
from webapp.sites.enrolment import EnrolmentRefused, vantage_enrol, vantage_for_agent
from webapp.sites.models import VantagePoint
from workers.agent.sealing import fingerprint
from workers.engine.errors import InvalidParams

KEYWORD = b"agent"


class AgentAuthentication(BaseAuthentication):
    """`Authorization: Agent TOKEN`: request.auth is the agent's vantage point."""

    def authenticate(self, request: Request) -> tuple[None, VantagePoint] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != KEYWORD:
            return None
        if len(words) != 2:
            raise AuthenticationFailed("Authorization: Agent TOKEN")
        vantage_point = vantage_for_agent(words[1].decode("ascii", errors="replace"))
        if vantage_point is None:
            raise AuthenticationFailed("unknown or revoked agent token")
        return None, vantage_point

    def authenticate_header(self, request: Request) -> str:
        return "Agent"


class AgentAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """How the OpenAPI schema names the agent token (registered by being defined)."""

    target_class = "webapp.api.agents.AgentAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Agent TOKEN`: the agent token a remote vantage point got at "
            "enrolment (docs/vantage-points.md)",
        }


class IsAgent(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, VantagePoint)


class EnrolmentThrottle(AnonRateThrottle):
    """Enrolment attempts per client address: a token is not to be guessed."""

    rate = "10/min"


class AgentView(APIView):
    authentication_classes = (AgentAuthentication,)
    permission_classes = (IsAgent,)
    throttle_classes = ()

    def vantage_point(self, request: Request) -> VantagePoint:
        return cast(VantagePoint, request.auth)


def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object (400 for anything else)."""
    if not isinstance(request.data, dict):
        raise ValidationError({"detail": "a JSON object"})
    return request.data


class EnrolView(APIView):
    """POST {token, public_key}: enrol the agent holding a one-time enrolment token."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = (EnrolmentThrottle,)

    @extend_schema(
        request=inline_serializer(
            "AgentEnrolment",
            {"token": serializers.CharField(), "public_key": serializers.CharField()},
        ),
        responses={201: None},
    )
    def post(self, request: Request) -> Response:
        token, key = _body(request).get("token"), _body(request).get("public_key")
        if not isinstance(token, str) or not isinstance(key, str):
            raise ValidationError({"token": "text", "public_key": "text (base64, 32 bytes)"})
        try:
            enrolment = vantage_enrol(token=token, public_key=key, now=timezone.now())
        except EnrolmentRefused as exc:
            raise AuthenticationFailed(str(exc)) from None
        except InvalidParams as exc:
            raise ValidationError({exc.field: exc.message}) from None
        except BrokerAccountsUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        vantage_point = enrolment.vantage_point
        return Response(
            {
                "vantage_point": vantage_point.name,
                "queue": vantage_point.queue,
                "agent_token": enrolment.agent_token,
                "broker_url": enrolment.broker.url,
                "public_key": fingerprint(vantage_point.public_key),
            },
            status=status.HTTP_201_CREATED,
            headers={"Cache-Control": "no-store"},
        )


class ClaimView(AgentView):
    """POST {worker}: the run's parameters and sealed credential (200), nothing to measure
    (204), or wait and it will be sent again (409, Retry-After)."""

    @extend_schema(request=None, responses={200: None, 204: None, 409: None})
    def post(self, request: Request, pk: int) -> Response:
        worker = str(_body(request).get("worker", ""))[:150] or "agent"
        try:
            claim = agent_claim(vantage_point=self.vantage_point(request), run_id=pk, worker=worker)
        except UnknownRun:
            raise NotFound() from None
        except RunMustWait as wait:
            return Response(
                {"detail": str(wait), "retry_after_s": CLAIM_RETRY_S},
                status=status.HTTP_409_CONFLICT,
                headers={"Retry-After": str(int(CLAIM_RETRY_S))},
            )
        if claim is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        answer: dict[str, object] = {
            "run": claim.run_id,
            "params": claim.params,
            "credential": claim.sealed_credential,
        }
        if claim.trace_sha256:
            answer["trace_sha256"] = claim.trace_sha256
        if claim.sealed_destination_credential:
            answer["destination_credential"] = claim.sealed_destination_credential
        return Response(answer, headers={"Cache-Control": "no-store"})


class CleanupsView(AgentView):
    """POST: the due cleanups of the vantage point's lost write and copy runs (each now an
    attempt the agent reports through CleanupReportView), with the credential of the
    endpoint written to sealed to its key for that run."""

    @extend_schema(request=None, responses={200: None})
    def post(self, request: Request) -> Response:
        cleanups = agent_cleanups(vantage_point=self.vantage_point(request), now=timezone.now())
        answer = [
            {
                "run": cleanup.run_id,
                "run_tag": cleanup.run_tag,
                "urls": list(cleanup.urls),
                "credential": cleanup.sealed_credential,
                "credential_hosts": list(cleanup.credential_hosts),
            }
            for cleanup in cleanups
        ]
        return Response({"cleanups": answer}, headers={"Cache-Control": "no-store"})


class CleanupReportView(AgentView):
    """POST {deleted} or {error}: what the agent's cleanup of a lost run did."""

    @extend_schema(request=None, responses={200: None})
    def post(self, request: Request, pk: int) -> Response:
        try:
            stored = agent_cleanup_report(
                vantage_point=self.vantage_point(request), run_id=pk, report=_body(request)
            )
        except UnknownRun:
            raise NotFound() from None
        except MalformedReport as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response({"stored": stored})


class TraceView(AgentView):
    """GET: the recorder CSV (text/csv) with this sha256, which a replay the agent is
    measuring replays (404 for any other: another vantage point's, or no running replay)."""

    @extend_schema(request=None, responses={(200, "text/csv"): str, 404: None})
    def get(self, request: Request, sha256: str) -> HttpResponse:
        try:
            text = agent_trace(vantage_point=self.vantage_point(request), sha256=sha256)
        except UnknownRun:
            raise NotFound() from None
        return HttpResponse(
            text.encode("utf-8"),
            content_type="text/csv; charset=utf-8",
            headers={"Cache-Control": "no-store"},
        )


class ProgressView(AgentView):
    """POST {client_bytes, finished}: a heartbeat of a run; answers {cancel}."""

    @extend_schema(request=None, responses={200: None})
    def post(self, request: Request, pk: int) -> Response:
        client_bytes = _body(request).get("client_bytes", [])
        finished = _body(request).get("finished", [])
        if not isinstance(client_bytes, list) or not isinstance(finished, list):
            raise ValidationError({"client_bytes": "a list", "finished": "a list"})
        try:
            cancel = agent_progress(
                vantage_point=self.vantage_point(request),
                run_id=pk,
                client_bytes=client_bytes,
                finished=finished,
            )
        except UnknownRun:
            raise NotFound() from None
        except MalformedReport as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response({"cancel": cancel})


class ResultView(AgentView):
    """POST the run JSON: stored once ({stored: true}), or already ended ({stored: false})."""

    @extend_schema(request=None, responses={200: None})
    def post(self, request: Request, pk: int) -> Response:
        try:
            stored = agent_result(
                vantage_point=self.vantage_point(request),
                run_id=pk,
                run_json=_body(request),
            )
        except UnknownRun:
            raise NotFound() from None
        except MalformedReport as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response({"stored": stored})


class FailureView(AgentView):
    """POST {message, error_class, phase}: a claimed run the agent could not measure."""

    @extend_schema(request=None, responses={200: None})
    def post(self, request: Request, pk: int) -> Response:
        try:
            ended = agent_failure(
                vantage_point=self.vantage_point(request),
                run_id=pk,
                message=str(_body(request).get("message", "")),
                error_class=str(_body(request).get("error_class", "")),
                phase=str(_body(request).get("phase", "")),
            )
        except UnknownRun:
            raise NotFound() from None
        except MalformedReport as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response({"stored": ended})


class HeartbeatView(AgentView):
    """POST {hostname, pid, version, started_at, current_run_id, stopped}: the agent's worker
    is alive (or stopped), on its own queue."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        body = _body(request)
        try:
            agent_heartbeat(
                vantage_point=self.vantage_point(request),
                worker=body,
                now=timezone.now(),
                stopped=body.get("stopped") is True,
            )
        except (MalformedReport, TypeError, ValueError) as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
