"""Figures on pages: sizes binary (KiB, MiB, GiB), rates decimal MB/s, latencies in ms from
1 ms, and every page says so; with the small things a newcomer noticed on the way."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.template import Context, Template
from django.test import Client

from tests.webapp.factories import TestFileFactory, VantagePointFactory
from webapp.accounts.services import user_set_role
from webapp.core.units import format_duration_s, format_latency_us, format_rate, format_size

MiB = 1024 * 1024


def _login(client: Client, role: str) -> Client:
    user = User.objects.create_user(role)
    user_set_role(user=user, role=role)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("n_bytes", "shown"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (16 * MiB, "16 MiB"), (1 << 30, "1 GiB")],
)
def test_sizes_are_binary(n_bytes: int, shown: str) -> None:
    assert format_size(n_bytes) == shown


@pytest.mark.parametrize(
    ("us", "shown"),
    [
        (0.4, "0 µs"),
        (850, "850 µs"),
        (999.4, "999 µs"),
        (999.6, "1.00 ms"),
        (1234, "1.23 ms"),
        (45678, "45.7 ms"),
        (123456, "123 ms"),
        (12_345_678, "12,346 ms"),
    ],
)
def test_latencies_from_1_ms_are_in_ms(us: float, shown: str) -> None:
    assert format_latency_us(us) == shown


def test_times_under_a_second_are_latencies_and_rates_are_decimal_mb_per_s() -> None:
    assert (format_duration_s(0.0123), format_duration_s(0.0004)) == ("12.3 ms", "400 µs")
    assert (format_duration_s(3.254), format_duration_s(523.4)) == ("3.25 s", "523 s")
    assert (format_rate(968.44), format_rate(1.6, 2)) == ("968.4 MB/s", "1.60 MB/s")


def test_the_filters_write_what_the_functions_write_and_a_dash_for_nothing() -> None:
    template = Template(
        "{% load units %}"
        "{{ a|size }}|{{ b|rate }}|{{ c|latency_us }}|{{ d|duration_s }}|{{ e|size }}"
    )
    html = template.render(Context({"a": 16 * MiB, "b": 12.34, "c": 2500, "d": 0.05, "e": None}))
    assert html == "16 MiB|12.3 MB/s|2.50 ms|50.0 ms|—"


@pytest.mark.django_db
def test_a_16_mib_test_file_is_16_mib_not_16_mb_and_the_page_says_which_units(
    client: Client,
) -> None:
    test_file = TestFileFactory(size=16 * MiB)
    html = _login(client, "viewer").get(f"/endpoints/{test_file.endpoint_id}/").content.decode()
    assert '16 MiB <span class="muted">(16777216 B)</span>' in html
    assert "MB)" not in html
    note = re.search(r'<footer class="units-note" id="units-note">(.*?)</footer>', html, re.S)
    assert note and "1 MiB = 1,048,576 bytes" in note[1] and "MB/s (10<sup>6</sup>" in note[1]


@pytest.mark.django_db
def test_vantage_points_highlight_one_nav_item_and_show_the_full_worker_command(
    client: Client,
) -> None:
    VantagePointFactory(name="cern")
    html = _login(client, "viewer").get("/vantage-points/").content.decode()
    current = re.findall(r'<a href="([^"]+)" aria-current="page">', html)
    assert current == ["/vantage-points/"]
    assert "celery -A webapp worker -Q vantage.cern --concurrency 1 -n cern@%h" in html
    sites = _login(Client(), "operator").get("/sites/").content.decode()
    assert re.findall(r'<a href="([^"]+)" aria-current="page">', sites) == ["/sites/"]


@pytest.mark.django_db
def test_help_text_shows_commands_as_code_not_backticks(client: Client) -> None:
    user = User.objects.create_user("boss", is_superuser=True)
    client.force_login(user)
    html = client.get("/vantage-points/new/").content.decode()
    assert "<code>celery -A webapp worker -Q vantage.NAME</code>" in html
    assert "`" not in html
