"""Credentials through real Celery workers against the lab's authenticated sites: every kind
measures, no secret leaves where it belongs (broker message, worker log, client argv, run
JSON, API, pages, admin), the per-run folder is gone after the run and after a killed
worker's restart, and an oauth-client credential carries a schedule across a token's
expiry."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.celery_worker import WorkerProcess, session_members, wait_until
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Campaign, ClientAttempt, Run
from webapp.campaigns.schedules import campaigns_launch_due
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.lab import Lab

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

FILE = "/fedprobe/file-1M"
UNFINISHED = ("queued", "running")


def endpoint(lab: Lab, name: str, kind: str, credential: str) -> Endpoint:
    """A database endpoint for a lab endpoint, with a credential and its 1 MiB test file."""
    lab_endpoint = lab.endpoint(name)
    site, _ = Site.objects.get_or_create(name=f"creds-{lab_endpoint.site}")
    made = Endpoint.objects.create(
        site=site,
        name=f"creds-{name}-{Endpoint.objects.count()}",
        protocol=lab_endpoint.protocol,
        base_url=lab_endpoint.url,
        credential_kind=kind,
        credential=credential,
    )
    lab_file = next(f for f in lab_endpoint.files if f.path == FILE)
    TestFile.objects.create(
        endpoint=made, path=FILE, size=lab_file.size, adler32=lab_file.adler32, is_default=True
    )
    return made


def campaign(name: str, endpoints: list[Endpoint], vantage: str, **fields: Any) -> Campaign:
    values: dict[str, Any] = {
        "methods": ["direct"],
        "patterns": ["random"],
        "read_sizes": [4096],
        "fractions": [0.05],
        "clients": [2],
    }
    made = Campaign.objects.create(name=name, **(values | fields))
    made.endpoints.set(endpoints)
    made.vantage_points.set([VantagePoint.objects.get_or_create(name=vantage)[0]])
    return made


@pytest.fixture
def worker_env(lab: Lab, tmp_path: Path) -> dict[str, str]:
    secrets = tmp_path / "secrets"
    return {
        "FEDPROBE_CA_DIR": str(lab.ca_dir()),
        "FEDPROBE_SECRETS_DIR": str(secrets),
        "FEDPROBE_LOG_LEVEL": "DEBUG",
    }


@pytest.fixture
def secrets_of_kinds(lab: Lab) -> Iterator[dict[str, Any]]:
    """One endpoint per credential kind, and the secret text each must never show."""
    token = lab.mint_token()
    oauth = lab.oauth_client()
    proxy_pem = lab.write_proxy().read_text()
    key_line = max(proxy_pem.split("PRIVATE KEY-----")[1].splitlines(), key=len)
    return {
        "endpoints": [
            endpoint(lab, "local-roots", "token", token),
            endpoint(lab, "local-https", "oauth-client", json.dumps(oauth)),
            endpoint(lab, "local-gsi-root", "x509-proxy", proxy_pem),
            endpoint(lab, "local-gsi-https", "x509-proxy", proxy_pem),
        ],
        "secrets": [token, token.split(".")[2], oauth["client_secret"], key_line],
    }


def queued_messages(queue: str) -> list[bytes]:
    client = redis.Redis.from_url(str(settings.CELERY_BROKER_URL))
    try:
        return list(client.lrange(queue, 0, -1))
    finally:
        client.close()


def assert_absent(secrets: list[str], where: str, text: str | bytes) -> None:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    for secret in secrets:
        assert secret not in text, f"a credential in {where}"


def test_each_credential_kind_measures_and_no_secret_leaves_its_private_file(
    lab: Lab,
    start_celery_worker: Any,
    worker_env: dict[str, str],
    secrets_of_kinds: dict[str, Any],
) -> None:
    secrets = secrets_of_kinds["secrets"]
    runs = campaign_launch(
        campaign=campaign("creds", secrets_of_kinds["endpoints"], "creds"), trigger="api"
    )
    # Queued, not yet taken: the broker holds the messages as the worker will get them.
    messages = queued_messages("vantage.creds")
    assert len(messages) == len(runs)
    assert_absent(secrets, "the broker message", b"".join(messages))

    worker: WorkerProcess = start_celery_worker("creds", env=worker_env)
    argv_seen: set[str] = set()

    def all_ended() -> bool:
        assert worker.process is not None
        for pid in session_members(worker.process.pid):
            with contextlib.suppress(OSError):
                argv_seen.add(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        unfinished = Run.objects.filter(pk__in=[r.pk for r in runs], status__in=UNFINISHED)
        return not unfinished.exists()

    wait_until(all_ended, 180, "the credential runs", worker)
    ended = {
        run.endpoint.name.rsplit("-", 1)[0]: run
        for run in Run.objects.filter(pk__in=[r.pk for r in runs])
    }
    assert {name: (run.status, run.auth) for name, run in ended.items()} == {
        "creds-local-roots": ("succeeded", "token"),
        "creds-local-https": ("succeeded", "token"),
        "creds-local-gsi-root": ("succeeded", "gsi"),
        "creds-local-gsi-https": ("succeeded", "x509"),
    }, {name: run.errors for name, run in ended.items()}
    assert any("forkserver" in argv for argv in argv_seen)  # the clients were watched
    assert_absent(secrets, "a process's argv", "\n".join(argv_seen))
    assert_absent(secrets, "the worker's log", worker.log())
    for run in ended.values():
        assert_absent(secrets, "the run JSON", json.dumps([run.result, run.errors]))
        records = ClientAttempt.objects.filter(run=run).values_list("record", flat=True)
        assert_absent(secrets, "the clients' records", json.dumps(list(records)))
    assert list(Path(worker_env["FEDPROBE_SECRETS_DIR"]).iterdir()) == []
    for where, text in shown(ended, secrets_of_kinds).items():
        assert_absent(secrets, where, text)


def shown(runs: dict[str, Run], kinds: dict[str, Any]) -> dict[str, str]:
    """Everything an admin sees of these endpoints and runs, in the API, pages and admin."""
    admin = User.objects.create_superuser("creds-admin", password="x")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=admin)}")
    page = Client()
    page.force_login(admin)
    texts = {}
    for made in kinds["endpoints"]:
        texts |= {
            f"api endpoint {made.pk}": api.get(f"/api/v1/endpoints/{made.pk}/"),
            f"endpoint page {made.pk}": page.get(f"/endpoints/{made.pk}/"),
            f"endpoint form {made.pk}": page.get(f"/endpoints/{made.pk}/edit/"),
            f"admin endpoint {made.pk}": page.get(f"/admin/sites/endpoint/{made.pk}/change/"),
        }
    for run in runs.values():
        texts |= {
            f"api run {run.pk}": api.get(f"/api/v1/runs/{run.pk}/"),
            f"run page {run.pk}": page.get(f"/runs/{run.pk}/"),
        }
    texts |= {"api endpoints": api.get("/api/v1/endpoints/"), "schema": api.get("/api/schema/")}
    for where, response in texts.items():
        assert response.status_code == 200, where
    assert b"Credential kind" in texts[f"admin endpoint {made.pk}"].content
    return {where: response.content.decode(errors="replace") for where, response in texts.items()}


@pytest.mark.faults
def test_a_killed_workers_credential_folder_is_removed_when_a_worker_starts(
    lab: Lab, start_celery_worker: Any, worker_env: dict[str, str]
) -> None:
    far = endpoint(lab, "far-roots", "token", lab.mint_token())
    # Far (10 ms RTT), 2 clients of ~1000 synchronous reads each: several seconds of running.
    runs = campaign_launch(
        campaign=campaign("creds-kill", [far], "creds-kill", fractions=[1.0]), trigger="api"
    )
    secrets_dir = Path(worker_env["FEDPROBE_SECRETS_DIR"])
    worker: WorkerProcess = start_celery_worker("creds-kill", env=worker_env)

    def measuring() -> bool:
        running = Run.objects.filter(pk=runs[0].pk, status="running").exists()
        return running and any(secrets_dir.glob("run-*/token"))

    wait_until(measuring, 60, "the run measuring with its credential folder", worker)
    worker.kill_host()
    left = list(secrets_dir.glob("run-*"))
    assert len(left) == 1  # kill -9: nothing removed it
    start_celery_worker("creds-kill", env=worker_env)
    assert not left[0].exists()


@pytest.mark.faults
def test_an_oauth_client_schedule_runs_across_its_tokens_expiry(
    lab: Lab, start_celery_worker: Any, worker_env: dict[str, str]
) -> None:
    """The lab's short client hands out 30-second tokens: two scheduled launches 35 s apart
    each need a fresh one (the first token has expired when the second slot comes), and
    every run succeeds."""
    short = endpoint(lab, "local-https", "oauth-client", json.dumps(lab.oauth_client(short=True)))
    nightly = campaign("creds-schedule", [short], "creds-schedule", clients=[1], deadline_s=10.0)
    Campaign.objects.filter(pk=nightly.pk).update(schedule="* * * * *")
    worker = start_celery_worker("creds-schedule", env=worker_env)
    # Slots a minute apart from the campaign's first (slots before it existed never launch).
    first_slot = nightly.created_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for minute in range(2):
        if minute:
            time.sleep(35)  # the previous token has expired by now
        (launch,) = campaigns_launch_due(now=first_slot + timedelta(minutes=minute, seconds=1))
        assert launch.error == "", launch.error
        wait_until(
            lambda: not Run.objects.filter(campaign=nightly, status__in=UNFINISHED).exists(),
            60,
            f"scheduled launch {minute}",
            worker,
        )
    runs = Run.objects.filter(campaign=nightly, trigger="schedule")
    assert [(r.status, r.auth) for r in runs] == [("succeeded", "token")] * 2, [
        r.errors for r in runs
    ]


def test_refusals_through_a_worker_end_with_their_class_and_reason(
    lab: Lab, start_celery_worker: Any, worker_env: dict[str, str]
) -> None:
    token = lab.mint_token()
    roots = lab.endpoint("local-roots").url
    cases = {
        "no-credential": (endpoint(lab, "local-roots", "none", ""), "auth", "no credential"),
        "expired": (
            endpoint(lab, "local-https", "token", lab.mint_token(expired=True)),
            "auth",
            "token expired at",
        ),
        "wrong-scope": (
            renamed(endpoint(lab, "local-roots", "token", lab.mint_token(scope="storage.read:/x"))),
            "auth",
            "permission denied",
        ),
        "wrong-audience": (
            renamed(endpoint(lab, "local-https", "token", lab.mint_token(audience="https://x"))),
            "auth",
            "403",
        ),
        "rogue-proxy": (
            endpoint(lab, "local-gsi-root", "x509-proxy", lab.write_proxy(rogue=True).read_text()),
            "auth",
            "under the CA CN=rogue lab CA",
        ),
        "name-mismatch": (
            renamed(
                endpoint(lab, "local-roots", "token", token),
                roots.replace("127.0.0.1", "127.0.0.2"),
            ),
            "tls",
            "name mismatch",
        ),
    }
    runs = campaign_launch(
        campaign=campaign("refusals", [e for e, _, _ in cases.values()], "refusals", clients=[1]),
        trigger="api",
    )
    rogue_runs = campaign_launch(
        campaign=campaign("rogue-ca", [cases["name-mismatch"][0]], "rogue-ca", clients=[1]),
        trigger="api",
    )
    workers = [
        start_celery_worker("refusals", env=worker_env),
        start_celery_worker(
            "rogue-ca", env={**worker_env, "FEDPROBE_CA_DIR": str(lab.rogue_ca_dir())}
        ),
    ]
    ids = [r.pk for r in [*runs, *rogue_runs]]
    wait_until(
        lambda: not Run.objects.filter(pk__in=ids, status__in=UNFINISHED).exists(),
        120,
        "the refused runs",
        *workers,
    )
    by_endpoint = {r.endpoint_id: r for r in Run.objects.filter(pk__in=[r.pk for r in runs])}
    for case, (made, error_class, reason) in cases.items():
        run = by_endpoint[made.pk]
        assert run.status == "failed", (case, run.status)
        first = run.errors[0]
        assert (first["class"], first["client"]) == (error_class, None), (case, first)
        assert reason in first["message"], (case, first["message"])
        # Only the expired token is the tester's fault (found before any request); the
        # others are the endpoint's refusals and count against it.
        assert run.is_tester_fault == (case == "expired"), (case, first)
    (unknown_ca,) = Run.objects.filter(pk__in=[r.pk for r in rogue_runs])
    assert unknown_ca.errors[0]["class"] == "tls"
    assert "unknown CA" in unknown_ca.errors[0]["message"]


def renamed(made: Endpoint, base_url: str | None = None) -> Endpoint:
    """The endpoint under a name of its own (several cases use the same lab endpoint)."""
    made.name = f"{made.name}-{made.pk}"
    made.base_url = base_url or made.base_url
    made.save()
    return made
