"""The evidence archive over the API (GET /api/v1/runs/{id}/evidence/ and
/api/v1/regressions/{id}/evidence/): one zip to attach to a site ticket (docs/evidence.md)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from webapp.dashboards.evidence import evidence_filename, evidence_zip
from webapp.dashboards.selectors.evidence import Evidence

ZIP = "application/zip"


class ZipRenderer(BaseRenderer):
    """application/zip for content negotiation (Accept: application/zip): the archive is
    answered whole by evidence_response; this renders only what else a request may answer
    (a 404 or a 409), as JSON."""

    media_type = ZIP
    format = "zip"
    charset = None
    render_style = "binary"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return JSONRenderer().render(data)


RENDERERS = [JSONRenderer, ZipRenderer]
RESPONSES = {
    (200, ZIP): OpenApiResponse(
        OpenApiTypes.BINARY,
        description="fedprobe-evidence-{run|regression}-{id}.zip (attachment): README.txt "
        "(what is wrong in one sentence, the site or the path, versions, commands), "
        "series.svg, series-nights.csv, series-runs.csv, failing-runs.csv, "
        "failing-clients.csv, failing-runs.json, other-vantage-points.csv, reproduce.sh; "
        "never a secret",
    ),
    404: OpenApiResponse(description="no such run or regression"),
}


def evidence_response(request: Request, evidence: Evidence, *, page: str) -> HttpResponse:
    """The archive as an attachment; `page` the evidence page's path (named in its README)."""
    body = evidence_zip(evidence, page_url=request.build_absolute_uri(page))
    return HttpResponse(
        body,
        content_type=ZIP,
        headers={
            "Content-Disposition": f'attachment; filename="{evidence_filename(evidence)}"',
            "Cache-Control": "private, no-store",
        },
    )
