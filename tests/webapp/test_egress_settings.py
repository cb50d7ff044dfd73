"""FEDPROBE_EGRESS_ALLOW: loopback in the embedded default, nothing in production, loud on
a malformed network; runs carry the policy."""

from __future__ import annotations

from tests.webapp.test_production_settings import PRODUCTION_ENV, production_setting, run_django


def test_the_embedded_default_allows_loopback_for_the_lab() -> None:
    assert production_setting("FEDPROBE_EGRESS_ALLOW", env={}) == {
        "FEDPROBE_EGRESS_ALLOW": ["127.0.0.0/8", "::1/128"]
    }


def test_production_allows_no_private_network_unless_told() -> None:
    assert production_setting("FEDPROBE_EGRESS_ALLOW") == {"FEDPROBE_EGRESS_ALLOW": []}
    told = {**PRODUCTION_ENV, "FEDPROBE_EGRESS_ALLOW": "10.20.0.0/16, 192.168.7.8"}
    assert production_setting("FEDPROBE_EGRESS_ALLOW", env=told) == {
        "FEDPROBE_EGRESS_ALLOW": ["10.20.0.0/16", "192.168.7.8/32"]
    }


def test_a_malformed_or_forbidden_network_stops_the_process_naming_the_variable() -> None:
    for value in ("10.0.0.0/33", "10.0.0.1/8", "169.254.169.254"):
        result = run_django(
            ["-c", "import django; django.setup()"], {"FEDPROBE_EGRESS_ALLOW": value}
        )
        assert result.returncode != 0
        assert "ImproperlyConfigured: FEDPROBE_EGRESS_ALLOW" in result.stderr, value
