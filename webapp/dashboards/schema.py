"""The query parameters of a page's form, for the OpenAPI schema of its API view, and the
form's errors as the API's 400 body: the page and its API accept the same queries."""

from __future__ import annotations

from typing import Any

from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from webapp.dashboards.forms import IdsField, ValuesField

# FloatField first: Django's FloatField is an IntegerField subclass.
_TYPES: list[tuple[type[forms.Field], OpenApiTypes]] = [
    (IdsField, OpenApiTypes.INT),
    (forms.FloatField, OpenApiTypes.DOUBLE),
    (forms.IntegerField, OpenApiTypes.INT),
    (forms.DateField, OpenApiTypes.DATE),
]
INT32_MAX = 2**31 - 1


def form_parameters(form_class: type[forms.Form]) -> list[OpenApiParameter]:
    """From a bound-free instance: the forms settle their fields (required...) in __init__."""
    return [_parameter(name, field) for name, field in form_class().fields.items()]


def _parameter(name: str, field: forms.Field) -> OpenApiParameter:
    if isinstance(field, ValuesField):
        return OpenApiParameter(
            name,
            _values_schema(field),
            OpenApiParameter.QUERY,
            required=False,
            description=str(field.help_text or field.label or ""),
        )
    many = isinstance(field, IdsField | forms.MultipleChoiceField)
    kind = _type(field)
    if isinstance(field, forms.ModelChoiceField) and not field.to_field_name:
        kind = OpenApiTypes.INT  # a primary key
    return OpenApiParameter(
        name,
        kind,
        OpenApiParameter.QUERY,
        required=field.required,
        description=str(field.help_text or field.label or ""),
        enum=_enum(field),
        many=many,
        explode=True if many else None,
    )


def _type(field: forms.Field) -> OpenApiTypes:
    return next((t for cls, t in _TYPES if isinstance(field, cls)), OpenApiTypes.STR)


def _choices(field: forms.Field) -> list[tuple[Any, Any]] | None:
    """A choice field's (value, label) pairs; None for other fields (and model choices)."""
    if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.ModelChoiceField):
        return list(field.choices)  # type: ignore[arg-type]
    return None


def _enum(field: forms.Field) -> list[str] | None:
    choices = _choices(field)
    return None if choices is None else [str(value) for value, _ in choices if value != ""]


def _values_schema(field: ValuesField) -> dict[str, Any]:
    """A repeated parameter: an array of its item's values, with the item's bounds."""
    return {"type": "array", "items": _item_schema(field.item), "maxItems": field.max_values}


def _item_schema(field: forms.Field) -> dict[str, Any]:
    choices = _choices(field)
    if choices is not None:
        described = "\n".join(f"* `{value}` - {label}" for value, label in choices)
        return {"enum": _enum(field), "type": "string", "description": described}
    if isinstance(field, forms.IntegerField) and not isinstance(field, forms.FloatField):
        return _integer_schema(field.min_value, field.max_value)
    if isinstance(field, forms.FloatField):
        return {"type": "number", "format": "double"}
    schema: dict[str, Any] = {"type": "string"}
    if isinstance(field, forms.CharField):
        if field.required:
            schema["minLength"] = 1
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
    return schema


def _integer_schema(low: Any, high: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    if isinstance(high, int):
        schema["maximum"] = high
    if isinstance(low, int):
        schema["minimum"] = low
    if isinstance(high, int) and high > INT32_MAX:
        schema["format"] = "int64"
    return schema


def form_errors(form: forms.Form) -> dict[str, list[str]]:
    """{field: [message, ...]}, as DRF answers a 400."""
    data: dict[str, Any] = form.errors.get_json_data()
    return {field: [error["message"] for error in errors] for field, errors in data.items()}
