"""Secrets are hidden in log text; the rest of the line stays readable."""

from __future__ import annotations

import logging
import sys

import pytest

from webapp.core.redact import RedactSecretsFilter, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "copy https://alice:s3cret@se.example.org/f failed",
            "copy https://alice:[redacted]@se.example.org/f failed",
        ),
        (
            "open root://se.example.org//f?authz=abc.def&xrd.wantprot=unix",
            "open root://se.example.org//f?authz=[redacted]&xrd.wantprot=unix",
        ),
        (
            "GET davs://se.example.org/f?access_token=eyJ0eXAi",
            "GET davs://se.example.org/f?access_token=[redacted]",
        ),
        (
            "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig",
            "Authorization: Bearer [redacted]",
        ),
        (
            "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
            "Authorization: Token [redacted]",
        ),
        ("password=hunter2 user=alice", "password=[redacted] user=alice"),
        (
            '"GET /accounts/oidc/callback/?code=SplxlOBeZQQYbYS6WxSbIA&state=af0ifjsldkj HTTP/1.1"',
            '"GET /accounts/oidc/callback/?code=[redacted]&state=[redacted] HTTP/1.1"',
        ),
        (
            "proxy -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY----- read",
            "proxy [redacted] PEM block read",
        ),
    ],
)
def test_redact_hides_the_secret_and_keeps_the_rest(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "open root://se.example.org:1094//store/file-4M took 0.2 s",
        "Token authentication failed for user alice",
        "run 12 of campaign nightly: 16 clients, read_size 4096",
    ],
)
def test_redact_leaves_lines_without_secrets_alone(text: str) -> None:
    assert redact(text) == text


def test_filter_redacts_message_arguments_and_traceback() -> None:
    try:
        raise ConnectionError("https://alice:s3cret@se.example.org/f refused")
    except ConnectionError:
        record = logging.LogRecord(
            "webapp", logging.ERROR, __file__, 1, "fetch %s", ("?authz=tok3n",), sys.exc_info()
        )
    assert RedactSecretsFilter().filter(record)
    line = logging.Formatter().format(record)
    assert "fetch ?authz=[redacted]" in line
    assert "alice:[redacted]@se.example.org" in line
    assert "s3cret" not in line
    assert "tok3n" not in line
