"""Serializer fields of the accounts app."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class CredentialField(serializers.CharField):
    """A credential: accepted on writes, never in responses (unless write_only=False)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("write_only", True)
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("style", {"input_type": "password"})
        super().__init__(**kwargs)
