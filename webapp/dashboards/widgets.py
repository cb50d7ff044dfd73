"""Widgets of the dashboards' filter forms."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString


class LightSelect(forms.Select):
    """A select drawn in Python: Django's draws each option with a template of its own (a
    hundred sites cost tens of milliseconds a request)."""

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: Any = None,
    ) -> SafeString:
        chosen = "" if value in (None, "") else str(value)
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            ((v, " selected" if str(v) == chosen else "", label) for v, label in self.choices),
        )
        attributes = flatatt(self.build_attrs(self.attrs, attrs))
        return format_html('<select name="{}"{}>{}</select>', name, attributes, options)
