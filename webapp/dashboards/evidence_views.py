"""The evidence pages: /runs/{id}/evidence/ and /regressions/{id}/evidence/, what the
archive (GET /api/v1/runs/{id}/evidence/, /api/v1/regressions/{id}/evidence/) holds, to read
before downloading it. Access as the run's and the regression's pages: any role."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views import View

from webapp.accounts.access import ViewerRequiredMixin
from webapp.campaigns.models import Run
from webapp.campaigns.run_table import without_secrets
from webapp.dashboards.evidence import (
    FILES,
    evidence_filename,
    evidence_svg,
    page_without_secrets,
)
from webapp.dashboards.reproduce import (
    CREDENTIAL_HELP,
    credential_of,
    public_url,
    reproduce_commands,
)
from webapp.dashboards.selectors.evidence import (
    MAX_CLIENTS,
    MAX_FAILING,
    MAX_OTHER_RUNS,
    MAX_RUNS,
    Evidence,
    NoEvidence,
    regression_evidence_get,
    run_evidence_get,
)
from webapp.watch.models import Regression

TEMPLATE = "dashboards/evidence.html"


class RunEvidenceView(ViewerRequiredMixin, View):
    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        try:
            evidence = run_evidence_get(pk=pk)
        except Run.DoesNotExist:
            raise Http404("no such run") from None
        return _page(request, evidence, reverse("run-evidence", args=[pk]))


class RegressionEvidenceView(ViewerRequiredMixin, View):
    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        try:
            evidence = regression_evidence_get(pk=pk)
        except Regression.DoesNotExist:
            raise Http404("no such regression") from None
        except NoEvidence as exc:
            context = {"no_evidence": str(exc), "regression_id": pk}
            return render(request, TEMPLATE, context, status=409)
        return _page(request, evidence, reverse("regression-evidence", args=[pk]))


def _page(request: HttpRequest, evidence: Evidence, download_url: str) -> HttpResponse:
    run = evidence.run
    credential = credential_of(evidence.endpoint.credential_kind)
    context = {
        "evidence": evidence,
        # svg_chart escapes every name it draws: the document is ours, its text is data.
        "chart": mark_safe(evidence_svg(evidence)),
        "test_file_url": public_url(run.test_file.url) if run else "",
        "failing": [_failure(failed) for failed in evidence.failing],
        "commands": reproduce_commands(run) if run else [],
        "credential_help": CREDENTIAL_HELP[credential],
        "download_url": download_url,
        "filename": evidence_filename(evidence),
        "files": FILES,
        "limits": {
            "runs": MAX_RUNS,
            "failing": MAX_FAILING,
            "clients": MAX_CLIENTS,
            "other_runs": MAX_OTHER_RUNS,
        },
    }
    response = render(request, TEMPLATE, context)
    html = page_without_secrets(response.content.decode(), evidence.endpoint)
    response.content = html.encode()
    return response


def _failure(run: Run) -> dict[str, object]:
    first = run.errors[0] if run.errors and isinstance(run.errors[0], dict) else {}
    message = without_secrets(str(first.get("message") or ""))
    return {"run": run, "error_class": first.get("class") or run.status, "message": message}
