"""Swagger UI (/api/docs/) runs under the Content-Security-Policy: its start-up script is a
file of ours, not inline (issue 10, item 12)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_swagger_ui_runs_under_the_policy(browser_page: Any, live_server: Any) -> None:
    page, watch = browser_page("viewer")
    response = page.goto(f"{live_server.url}/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    watch.assert_clean()
