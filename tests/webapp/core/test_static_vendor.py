"""The vendored Plotly.js is the pinned release, byte for byte (static/vendor/plotly/README.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.conf import settings

PLOTLY = Path(settings.BASE_DIR) / "static/vendor/plotly/plotly-cartesian-4.1.1.min.js"
PLOTLY_SHA256 = "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"


def test_vendored_plotly_matches_its_pinned_checksum() -> None:
    assert hashlib.sha256(PLOTLY.read_bytes()).hexdigest() == PLOTLY_SHA256


def test_pages_load_the_vendored_plotly() -> None:
    include = (Path(settings.BASE_DIR) / "templates/includes/plotly.html").read_text()
    assert f"vendor/plotly/{PLOTLY.name}" in include
