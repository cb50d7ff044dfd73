"""The query parameters of a page's form, for the OpenAPI schema of its API view, and the
form's errors as the API's 400 body: the page and its API accept the same queries."""

from __future__ import annotations

from typing import Any

from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

# FloatField first: Django's FloatField is an IntegerField subclass.
_TYPES: list[tuple[type[forms.Field], OpenApiTypes]] = [
    (forms.FloatField, OpenApiTypes.DOUBLE),
    (forms.IntegerField, OpenApiTypes.INT),
]


def form_parameters(form_class: type[forms.Form]) -> list[OpenApiParameter]:
    """From a bound-free instance: the forms settle their fields (required...) in __init__."""
    return [_parameter(name, field) for name, field in form_class().fields.items()]


def _parameter(name: str, field: forms.Field) -> OpenApiParameter:
    many = isinstance(field, forms.MultipleChoiceField)
    kind = next((t for cls, t in _TYPES if isinstance(field, cls)), OpenApiTypes.STR)
    if isinstance(field, forms.ModelChoiceField) and not field.to_field_name:
        kind = OpenApiTypes.INT  # a primary key
    enum = None
    if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.ModelChoiceField):
        enum = [str(value) for value, _ in field.choices if value != ""]
    return OpenApiParameter(
        name,
        kind,
        OpenApiParameter.QUERY,
        required=field.required,
        description=str(field.help_text or field.label or ""),
        enum=enum,
        many=many,
        explode=True if many else None,
    )


def form_errors(form: forms.Form) -> dict[str, list[str]]:
    """{field: [message, ...]}, as DRF answers a 400."""
    data: dict[str, Any] = form.errors.get_json_data()
    return {field: [error["message"] for error in errors] for field, errors in data.items()}
