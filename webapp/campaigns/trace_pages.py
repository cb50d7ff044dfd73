"""The Traces page (operators): recorded jobs to replay, each with what the engine read in it,
an upload form (a recorder CSV file and a name; a bad line is shown on the `trace` field) and
a delete button for one no campaign replays."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from webapp.accounts.access import OperatorRequiredMixin
from webapp.accounts.roles import can_edit
from webapp.campaigns.traces import (
    MAX_NAME,
    MAX_TRACE_TEXT,
    Trace,
    TraceRefused,
    trace_create,
    trace_delete,
)


class TraceUploadForm(forms.Form):
    name = forms.CharField(max_length=MAX_NAME, help_text="Unique; campaigns choose it by name.")
    trace = forms.FileField(
        help_text="The XRootD client recorder's CSV (XRD_PLUGIN=libXrdClRecorder-5.so "
        "XRD_RECORDERPATH=job.csv), at most 4 MiB. A replay reads its files at the same paths "
        "on each endpoint of the campaign, which must hold them."
    )

    def clean_trace(self) -> str:
        upload = self.cleaned_data["trace"]
        if upload.size > MAX_TRACE_TEXT:
            raise forms.ValidationError(
                f"has {upload.size} bytes, more than {MAX_TRACE_TEXT} (4 MiB)"
            )
        try:
            return str(upload.read().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise forms.ValidationError(f"is not UTF-8 text: {exc.reason}") from None


class TraceListView(OperatorRequiredMixin, View):
    template_name = "campaigns/trace_list.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._render(request, TraceUploadForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        form = TraceUploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                trace = trace_create(
                    name=form.cleaned_data["name"],
                    text=form.cleaned_data["trace"],
                    owner=request.user if isinstance(request.user, User) else None,
                )
            except TraceRefused as exc:
                form.add_error(exc.field, exc.message)
            else:
                messages.success(request, f"Trace {trace.name!r} uploaded.")
                return redirect("campaigns:trace-list")
        return self._render(request, form, status=400)

    def _render(
        self, request: HttpRequest, form: TraceUploadForm, status: int = 200
    ) -> HttpResponse:
        traces = Trace.objects.select_related("owner").defer("text")
        return render(request, self.template_name, {"form": form, "traces": traces}, status=status)


class TraceDeleteView(OperatorRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        trace = get_object_or_404(Trace, pk=pk)
        if not can_edit(request.user, trace):
            raise PermissionDenied("only its owner or an admin deletes this trace")
        try:
            trace_delete(trace=trace)
        except TraceRefused as exc:
            messages.error(request, f"Not deleted: {exc.field}: {exc.message}")
        else:
            messages.success(request, f"Trace {trace.name!r} deleted.")
        return redirect("campaigns:trace-list")
