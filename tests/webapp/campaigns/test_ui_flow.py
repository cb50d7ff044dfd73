"""The whole flow through the pages, as a browser does it: log in with the login form, create a
campaign on lab endpoints with the campaign form, launch it, a real Celery worker measures it,
and the run pages show it succeed with each client's figures. CSRF is enforced throughout."""

from __future__ import annotations

import html
import re
import time
from typing import Any

from django.contrib.auth.models import Group, User
from django.test import Client
from pytest_django.fixtures import Settings

from tests.celery_worker import WorkerProcess
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Campaign
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

PASSWORD = "correct horse battery staple"
WAIT_S = 90


def csrf_token(page: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


def get(browser: Client, path: str) -> str:
    response = browser.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def log_in(browser: Client) -> None:
    token = csrf_token(get(browser, "/accounts/login/"))
    form = {"username": "olga", "password": PASSWORD, "next": "/campaigns/"}
    refused = browser.post("/accounts/login/", form)
    assert refused.status_code == 403  # no CSRF token
    response = browser.post("/accounts/login/", {**form, "csrfmiddlewaretoken": token})
    assert (response.status_code, response["Location"]) == (302, "/campaigns/")


def create_campaign(browser: Client, endpoint: Endpoint) -> Campaign:
    page = get(browser, "/campaigns/new/")
    assert f">{endpoint.name} (root, data server)</option>" in page
    form = {
        "csrfmiddlewaretoken": csrf_token(page),
        "name": "ui flow",
        "endpoints": [endpoint.pk],
        "methods": "direct",
        "patterns": "sequential, random",
        "read_sizes": "64k",
        "fractions": "0.25",
        "clients": "2",
        "files": "1",
        "depth": "64",
        "vector_size": "256",
        "skip": "3",
        "readahead": "0",
        "streams": "1",
        "repetitions": "1",
    }
    preview = browser.post("/campaigns/new/", {**form, "preview": "1"}).content.decode()
    assert '<strong class="preview-runs">2</strong>' in preview
    assert not Campaign.objects.exists()
    response = browser.post("/campaigns/new/", form)
    assert response.status_code == 302, response.content.decode()
    campaign = Campaign.objects.get(name="ui flow")
    assert response["Location"] == f"/campaigns/{campaign.pk}/"
    return campaign


def launch(browser: Client, campaign: Campaign) -> list[int]:
    page = get(browser, f"/campaigns/{campaign.pk}/")
    assert "Launch 2 runs" in page
    assert browser.post(f"/campaigns/{campaign.pk}/launch/").status_code == 403  # no token
    response = browser.post(
        f"/campaigns/{campaign.pk}/launch/", {"csrfmiddlewaretoken": csrf_token(page)}
    )
    assert response["Location"] == f"/runs/?campaign={campaign.pk}"
    runs_page = get(browser, response["Location"])
    assert "2 runs queued" in runs_page
    return [int(i) for i in re.findall(r'<tr data-run-id="(\d+)"', runs_page)]


def wait_for_success(browser: Client, run_ids: list[int], worker: WorkerProcess) -> None:
    """Poll the status JSON and each run's page, as the pages' scripts and a reader do."""
    deadline = time.monotonic() + WAIT_S
    ids = ",".join(map(str, run_ids))
    while True:
        runs = browser.get(f"/runs/status/?ids={ids}&clients=1").json()["runs"]
        pages = [get(browser, f"/runs/{i}/") for i in run_ids]
        if all(run["final"] for run in runs):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"runs not final after {WAIT_S} s: {runs}\n{worker.diagnose()}")
        time.sleep(0.5)
    assert [run["status"] for run in runs] == ["succeeded"] * len(run_ids), runs
    for run in runs:
        assert run["bytes_read"] == run["bytes_planned"] > 0
        assert run["percent"] == 100.0
    for page in pages:
        assert '<span class="badge status-succeeded" id="run-status"' in page


def test_the_full_flow_through_the_pages(
    lab: Any, celery_worker: WorkerProcess, settings: Settings
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="local-root")
    # A transactional test before this one may have flushed the groups migrations made.
    Group.objects.get_or_create(name="operator")
    user_set_role(user=User.objects.create_user("olga", password=PASSWORD), role="operator")
    browser = Client(enforce_csrf_checks=True)

    log_in(browser)
    campaign = create_campaign(browser, endpoint)
    run_ids = launch(browser, campaign)
    assert len(run_ids) == 2
    wait_for_success(browser, run_ids, celery_worker)

    for run_id in run_ids:
        page = get(browser, f"/runs/{run_id}/")
        # "968.44 MB/s", or "1,234.56 MB/s" on a host where the local site reads that fast
        assert re.search(r"<dd>[0-9][0-9,]*\.[0-9]{2} MB/s</dd>", page)
        assert '"final": true' in page  # ended: its script draws the charts, never polls
        rows = re.findall(r'<tr data-client="(\d)">(.*?)</tr>', page, re.S)
        assert [client for client, _ in rows] == ["0", "1"]
        for _, row in rows:
            cells = [
                html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            ]
            status, bytes_read = re.sub(r"<[^>]+>", "", cells[1]), int(cells[2])
            open_s, ttfb_s, throughput = (figure(c) for c in cells[4:7])
            assert status == "ok"
            assert bytes_read == 4 * 1024 * 1024  # a quarter of the 16 MiB default file
            assert open_s > 0 and ttfb_s > 0 and throughput > 0
            assert "127.0.0.1" in cells[7]  # served by


UNITS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0, "MB/s": 1.0, "": 1.0}


def figure(text: str) -> float:
    """A figure as the run page writes it ("6.05 ms", "850 µs", "1.20 s", "12.3 MB/s"), in
    seconds (or MB/s)."""
    number, _, unit = text.replace(",", "").partition(" ")
    return float(number) * UNITS[unit]
