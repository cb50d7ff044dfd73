"""Operations beyond reads in the web app (issue 20): an endpoint's scratch path is checked,
a campaign that writes or copies needs scratch paths, a destination and a token that may
write there (each refusal names its field and the endpoint), a launch gives the engine the
scratch directories and the run's id as its tag, and the run page shows what a write and a
copy did, from run JSON written by hand from the contract (docs/engine.md)."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    jwt,
)
from webapp.accounts.services import user_set_role
from webapp.campaigns.cleanups import run_cleanup
from webapp.campaigns.estimates import run_moved_bytes
from webapp.campaigns.forms import CampaignForm
from webapp.campaigns.models import Campaign, ClientAttempt, Run, RunCleanup, parameter_set_named
from webapp.campaigns.services import runs_reap
from webapp.sites.models import Endpoint
from workers.engine.params import AddressFamily, Operation

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def operator(name: str = "olga") -> User:
    user = User.objects.create_user(name)
    user_set_role(user=user, role="operator")
    return user


def writable(**fields: Any) -> Endpoint:
    """An endpoint with a test file and a scratch path."""
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe", **fields)
    TestFileFactory(endpoint=endpoint, path="/data/set/file-1")
    return endpoint  # type: ignore[no-any-return]


def form_data(endpoint: Endpoint, **fields: Any) -> dict[str, Any]:
    return {
        "name": "writes",
        "endpoints": [endpoint.pk],
        "methods": "direct",
        "patterns": "sequential",
        "read_sizes": "1M",
        "fractions": "1",
        "clients": "1",
        **fields,
    }


def form_errors(data: dict[str, Any], user: User) -> dict[str, list[str]]:
    form = CampaignForm(data=data, user=user)
    form.is_valid()
    return {name: [str(m) for m in messages] for name, messages in form.errors.items()}


# -- the endpoint's scratch path --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("scratch/x", "absolute"),
        ("/scratch/../data", ".."),
        ("/scratch?x=1", "query"),
        ("/scratch#top", "fragment"),
    ],
)
def test_a_scratch_path_is_absolute_plain_and_never_climbs(path: str, why: str) -> None:
    endpoint = EndpointFactory()
    endpoint.scratch_path = path
    with pytest.raises(ValidationError) as refused:
        endpoint.full_clean()
    assert why in refused.value.message_dict["scratch_path"][0]


def test_the_api_refuses_a_bad_scratch_path_naming_it_and_changes_nothing() -> None:
    user = User.objects.create_superuser("ada")
    endpoint = EndpointFactory(scratch_path="/scratch/ok")
    api = APIClient()
    api.force_authenticate(user)
    answer = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"scratch_path": "/a/../b"})
    assert answer.status_code == 400 and "scratch_path" in answer.json()
    endpoint.refresh_from_db()
    assert endpoint.scratch_path == "/scratch/ok"
    answer = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"scratch_path": "/scratch/new"})
    assert answer.status_code == 200 and answer.json()["scratch_path"] == "/scratch/new"


def test_the_scratch_url_is_built_as_test_file_urls_are() -> None:
    root = EndpointFactory(base_url="root://127.0.0.1:1094/", scratch_path="/scratch/s1")
    https = EndpointFactory(
        protocol="https", base_url="https://127.0.0.1:8443/", scratch_path="/scratch/s1/"
    )
    assert root.scratch_url() == "root://127.0.0.1:1094//scratch/s1/"
    assert https.scratch_url() == "https://127.0.0.1:8443/scratch/s1/"
    assert EndpointFactory().scratch_url() is None


# -- what a campaign needs for its operations --------------------------------------------------


def test_a_write_needs_a_scratch_path_on_every_endpoint_naming_operations_and_the_endpoint() -> (
    None
):
    user = operator()
    endpoint = EndpointFactory(name="no-scratch")
    TestFileFactory(endpoint=endpoint)
    errors = form_errors(form_data(endpoint, operations=["read", "write"]), user)
    assert list(errors) == ["operations"]
    assert "no-scratch" in errors["operations"][0] and "scratch" in errors["operations"][0]
    # Reading and metadata need none.
    assert form_errors(form_data(endpoint, operations=["read"]), user) == {}
    assert form_errors(form_data(endpoint, operations=["stat"]), user) == {}


def test_an_operation_the_protocol_does_not_do_is_refused_naming_it_and_the_endpoint() -> None:
    user = operator()
    endpoint = writable(name="plain-root", base_url="root://127.0.0.1:1094/")
    destination = writable(name="plain-destination", base_url="root://127.0.0.2:1094/")
    data = form_data(endpoint, operations=["read", "tpc-push"], destination_endpoint=destination.pk)
    errors = form_errors(data, user)
    assert "tpc-push is not done over XRootD: endpoint plain-root" in errors["operations"][0]


def test_a_copy_needs_a_destination_with_a_scratch_path() -> None:
    user = operator()
    source = writable()
    errors = form_errors(form_data(source, operations=["tpc-pull"]), user)
    assert list(errors) == ["destination_endpoint"]
    assert "tpc-pull needs a destination endpoint" in errors["destination_endpoint"][0]
    bare = EndpointFactory(name="bare-destination")
    errors = form_errors(
        form_data(source, operations=["tpc-push"], destination_endpoint=bare.pk), user
    )
    assert "bare-destination" in errors["destination_endpoint"][0]
    destination = writable()
    data = form_data(source, operations=["tpc-pull"], destination_endpoint=destination.pk)
    assert form_errors(data, user) == {}


def test_replay_is_refused_without_a_trace() -> None:
    errors = form_errors(form_data(writable(), operations=["replay"]), operator())
    assert "replay needs a trace" in errors["trace"][0]  # tests/webapp/campaigns/test_traces.py


def test_a_write_token_is_not_a_read_token_scopes_are_checked_before_any_run() -> None:
    user = User.objects.create_superuser("ada")
    read_only = writable(
        name="read-token",
        credential_kind="token",
        credential=jwt(iss="https://issuer.example", scope="storage.read:/"),
    )
    errors = form_errors(form_data(read_only, operations=["write"]), user)
    message = errors["operations"][0]
    assert "read-token" in message and "storage.modify:/scratch/fedprobe" in message
    may_write = writable(
        name="write-token",
        credential_kind="token",
        credential=jwt(
            iss="https://issuer.example", scope="storage.read:/ storage.modify:/scratch"
        ),
    )
    assert form_errors(form_data(may_write, operations=["write"]), user) == {}
    # A copy's destination is checked too, under its own field.
    data = form_data(may_write, operations=["tpc-push"], destination_endpoint=read_only.pk)
    assert "read-token" in form_errors(data, user)["destination_endpoint"][0]


def test_the_api_refuses_as_the_form_does_and_defaults_to_reading() -> None:
    user = operator("api-olga")
    api = APIClient()
    api.force_authenticate(user)
    endpoint = EndpointFactory(name="api-no-scratch")
    TestFileFactory(endpoint=endpoint)
    body = {
        "name": "api writes",
        "endpoints": [endpoint.pk],
        "methods": ["direct"],
        "patterns": ["sequential"],
        "read_sizes": [MiB],
        "fractions": [1],
        "clients": [1],
    }
    answer = api.post("/api/v1/campaigns/", {**body, "operations": ["write"]}, format="json")
    assert answer.status_code == 400 and "api-no-scratch" in answer.json()["operations"][0]
    answer = api.post("/api/v1/campaigns/", {**body, "operations": ["tpc-pull"]}, format="json")
    assert answer.status_code == 400 and "destination_endpoint" in answer.json()
    # A family other than any, 4, 6 and each (one run of each family) is refused, named.
    answer = api.post("/api/v1/campaigns/", {**body, "address_family": "5"}, format="json")
    assert answer.status_code == 400 and list(answer.json()) == ["address_family"]
    assert not Campaign.objects.exists()
    answer = api.post("/api/v1/campaigns/", body, format="json")
    assert answer.status_code == 201 and answer.json()["operations"] == ["read"]
    assert answer.json()["address_family"] == "any" and answer.json()["rate"] == 0.0


# -- what a launch gives the engine ------------------------------------------------------------


def test_a_write_run_writes_under_the_scratch_directory_tagged_with_its_id() -> None:
    endpoint = writable(base_url="root://127.0.0.1:1094/")
    campaign = CampaignFactory(
        endpoints=[endpoint],
        vantage_points=[VantagePointFactory()],
        operations=["write", "list"],
        file_size=2 * MiB,
        address_family="6",
    )
    write_cell, list_cell = campaign.cells()
    run = Run.from_cell(write_cell, campaign=campaign)
    run.save()
    params = run.measured_params()
    assert params.operation == Operation.WRITE
    assert params.urls == ("root://127.0.0.1:1094//scratch/fedprobe/",)
    # The id and the run's own suffix: ids repeat across deployments and databases.
    assert re.fullmatch(rf"{run.pk}-[0-9a-f]{{8}}", params.run_tag or "")
    assert params.run_tag == run.run_tag
    assert run.tag_suffix != Run.from_cell(write_cell, campaign=campaign).tag_suffix
    run.tag_suffix = ""  # a run made before runs had a suffix: its files were named so
    assert run.measured_params().run_tag == str(run.pk)
    assert (params.file_size, params.address_family) == (2 * MiB, AddressFamily.IPV6)
    assert params.adler32 == ()  # the test file is not read
    params.validate()
    listing = Run.from_cell(list_cell, campaign=campaign).measured_params()
    assert listing.operation == Operation.LIST
    assert listing.urls == ("root://127.0.0.1:1094//data/set/",)
    # A write moves what it writes (two clients, one file each), not the test file's size:
    # the estimate and the preview count that.
    assert run_moved_bytes(params, 16 * MiB) == 2 * 2 * MiB


def test_a_copy_run_reads_the_test_file_into_the_destinations_scratch_directory() -> None:
    source, destination = writable(), writable(base_url="root://127.0.0.2:1094/")
    campaign = CampaignFactory(
        endpoints=[source],
        vantage_points=[VantagePointFactory()],
        operations=["tpc-pull"],
        destination_endpoint=destination,
    )
    (cell,) = campaign.cells()
    run = Run.from_cell(cell, campaign=campaign)
    run.save()
    params = run.measured_params()
    assert params.operation == Operation.TPC_PULL
    assert params.urls == (run.test_file.url,)
    assert params.destination == "root://127.0.0.2:1094//scratch/fedprobe/"
    assert run.destination_endpoint == destination


# -- the run page -------------------------------------------------------------------------------


def page(run: Run) -> str:
    client = Client()
    client.force_login(operator("viewer"))
    answer = client.get(f"/runs/{run.pk}/")
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_run_page_shows_what_a_write_did() -> None:
    endpoint = writable()
    run = RunFactory(
        test_file=endpoint.files.get(),
        operation="write",
        file_size=4 * MiB,
        status=Run.Status.SUCCEEDED,
        wall_s=0.5,
        throughput_mbps=8.4,
        result={
            "operation": "write",
            "address_family": "4",
            "address": "127.0.0.1",
            "bytes_written": 8 * MiB,
            "server_checksum": "adler32:0a1b2c3d",
            "tpc": None,
            "ops_per_s": None,
            "latency_us": {"write": {"count": 8, "p50": 900.0}, "delete": {"count": 2}},
        },
    )
    html = page(run)
    assert '<dd id="run-operation">write</dd>' in html
    assert "127.0.0.1" in html and "adler32:0a1b2c3d" in html
    assert "8.0 MiB" in html or "8 MiB" in html
    assert "/scratch/fedprobe/" in html
    assert 'id="tpc-card"' not in html


def test_the_run_page_draws_a_copys_markers() -> None:
    source, destination = writable(), writable(name="dest-1")
    run = RunFactory(
        test_file=source.files.get(),
        operation="tpc-pull",
        destination_endpoint=destination,
        status=Run.Status.SUCCEEDED,
        wall_s=12.0,
        throughput_mbps=20.0,
        result={
            "operation": "tpc-pull",
            "address_family": "any",
            "address": None,
            "bytes_written": None,
            "server_checksum": "adler32:00000001",
            "ops_per_s": None,
            "tpc": {
                "markers": [
                    {"t_s": 5.0, "bytes": 100_000_000},
                    {"t_s": 10.0, "bytes": 200_000_000},
                    {"t_s": 11.5, "bytes": 268_435_456},
                ],
                "rate_mbps": 22.4,
                "source": run_source_url(source),
                "destination": destination.scratch_url(),
            },
        },
    )
    html = page(run)
    assert 'id="tpc-card"' in html and "<polyline" in html
    assert "dest-1" in html
    # The rate between the first two markers: 100 MB in 5 s.
    assert '<td class="num">20.0</td>' in html


def run_source_url(endpoint: Endpoint) -> str:
    return str(endpoint.files.get().url)


# -- a lost write run is cleaned up where it ran -------------------------------------------------


def test_the_reaper_sends_a_lost_write_runs_cleanup_to_its_vantage_points_queue() -> None:
    from webapp.celery import app

    point = VantagePointFactory(name="cleanup-point")
    broker = redis.Redis.from_url(app.conf.broker_url)
    broker.delete(point.queue)
    stale = timezone.now() - timedelta(minutes=5)
    runs = {}
    for operation in ("write", "read"):
        run = RunFactory(
            test_file=writable().files.get(),
            vantage_point=point,
            operation=operation,
            status=Run.Status.RUNNING,
            started_at=stale,
        )
        ClientAttempt.objects.create(run=run, client=0, heartbeat_at=stale)
        runs[operation] = run
    assert runs_reap(stale_after_s=60) == 2
    messages = [json.loads(raw) for raw in broker.lrange(point.queue, 0, -1)]
    broker.delete(point.queue)
    # One message, for the write only: a read leaves nothing behind.
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in messages] == [
        ("fedprobe.cleanup_run", f"[{runs['write'].pk}]")
    ]
    cleanup = RunCleanup.objects.get()
    assert (cleanup.run_id, cleanup.status, cleanup.attempts) == (runs["write"].pk, "pending", 1)
    # The next pass sends nothing while a worker holds it.
    assert runs_reap(stale_after_s=60) == 0
    assert broker.llen(point.queue) == 0


def test_a_cleanup_deletes_the_runs_files_and_nothing_else(tmp_path: Path, settings: Any) -> None:
    settings.FEDPROBE_FILE_ROOTS = [str(tmp_path)]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    endpoint = EndpointFactory(
        protocol="file", base_url=f"file://{tmp_path}", scratch_path="/scratch"
    )
    test_file = TestFileFactory(endpoint=endpoint, path="/data/f")
    run = RunFactory(test_file=test_file, operation="write", status=Run.Status.FAILED)
    mine = scratch / f"fedprobe-{run.run_tag}-c0-f0"
    # Another run, and another deployment's run of the same id (or this one's before its
    # database was made again): theirs.
    other = scratch / f"fedprobe-{run.pk + 1}-c0-f0"
    same_id = scratch / f"fedprobe-{run.pk}-c0-f0"
    kept = scratch / "notes.txt"
    for path in (mine, other, same_id, kept):
        path.write_bytes(b"x")
    RunCleanup.objects.create(run=run, attempts=1, due_at=timezone.now())
    deleted = run_cleanup(run_id=run.pk)
    assert [url.rsplit("/", 1)[-1] for url in deleted] == [mine.name]
    assert not mine.exists() and other.exists() and same_id.exists() and kept.exists()
    cleanup = RunCleanup.objects.get(run=run)
    assert (cleanup.status, cleanup.deleted) == ("done", 1)


def test_a_copys_cleanup_deletes_at_its_destination_and_a_failure_is_tried_again(
    tmp_path: Path, settings: Any
) -> None:
    """The local path: a lost copy's files are at the destination endpoint's scratch, not the
    source's; a cleanup that fails (here: the destination is outside the file roots) is
    reported, and the reaper's next pass after the back-off sends it again."""
    settings.FEDPROBE_FILE_ROOTS = [str(tmp_path / "allowed")]
    settings.FEDPROBE_CLEANUP_RETRY_S = 60
    source_scratch, destination_scratch = tmp_path / "src", tmp_path / "allowed" / "dst"
    for folder in (source_scratch, destination_scratch):
        folder.mkdir(parents=True)
    source = EndpointFactory(protocol="file", base_url=f"file://{tmp_path}", scratch_path="/src")
    destination = EndpointFactory(
        protocol="file", base_url=f"file://{tmp_path}/allowed", scratch_path="/dst"
    )
    run = RunFactory(
        test_file=TestFileFactory(endpoint=source, path="/data/f"),
        operation="tpc-pull",
        destination_endpoint=destination,
        status=Run.Status.FAILED,
    )
    name = f"fedprobe-{run.run_tag}-c0-f0"
    for folder in (source_scratch, destination_scratch):
        (folder / name).write_bytes(b"x")
    RunCleanup.objects.create(run=run, attempts=1, due_at=timezone.now())
    assert [url.rsplit("/", 1)[-1] for url in run_cleanup(run_id=run.pk)] == [name]
    assert not (destination_scratch / name).exists() and (source_scratch / name).exists()

    settings.FEDPROBE_FILE_ROOTS = [str(tmp_path / "elsewhere")]
    (destination_scratch / name).write_bytes(b"x")
    RunCleanup.objects.filter(run=run).update(status="pending", attempts=1, deleted=None)
    assert run_cleanup(run_id=run.pk) == []
    cleanup = RunCleanup.objects.get(run=run)
    assert (cleanup.status, cleanup.attempts) == ("pending", 1)
    assert "file roots" in cleanup.error or "FEDPROBE_FILE_ROOTS" in cleanup.error, cleanup.error
    assert runs_reap(stale_after_s=60) == 0  # its back-off: not sent yet
    assert RunCleanup.objects.get(run=run).attempts == 1
    RunCleanup.objects.filter(run=run).update(due_at=timezone.now() - timedelta(seconds=1))
    runs_reap(stale_after_s=60)
    assert RunCleanup.objects.get(run=run).attempts == 2  # sent again


def test_a_parameter_set_named_without_its_operation_is_a_reads() -> None:
    """Addresses from before operations and pinned families (compare, matrix, series) keep
    their meaning: a read's, over any family."""
    five = {"method": "direct", "pattern": "random", "read_size": 4096, "fraction": 0.1}
    assert parameter_set_named({**five, "clients": 1}) == {
        "operation": "read",
        **five,
        "clients": 1,
        "address_family": "any",
    }
    assert parameter_set_named({**five, "clients": 1, "operation": "write"})["operation"] == "write"
    named = parameter_set_named({**five, "clients": 1, "address_family": "6"})
    assert named is not None and named["address_family"] == "6"
    assert parameter_set_named(five) is None  # clients left to the most measured


@pytest.mark.lab
def test_a_lost_copys_files_are_deleted_at_its_destination_with_the_destinations_token(
    lab: Any, settings: Any
) -> None:
    """The local path against the lab's token door (roots://): source and destination both
    name its scratch folder, the source with a read token, the destination with the write
    token; only the destination's deletes (with the read token the door refuses, and the
    cleanup reports it, to be tried again)."""
    settings.FEDPROBE_CA_DIR = str(lab.ca_dir())
    door = lab.endpoint("local-roots")
    tokens = {kind: lab.token_file(kind).read_text().strip() for kind in ("read", "write")}

    def side(kind: str) -> Endpoint:
        return EndpointFactory(  # type: ignore[no-any-return]
            protocol=door.protocol,
            base_url=door.url,
            credential_kind="token",
            credential=tokens[kind],
            scratch_path=door.scratch_path,
        )

    source, destination = side("read"), side("write")
    run = RunFactory(
        test_file=TestFileFactory(endpoint=source, path="/fedprobe/file-1M"),
        operation="tpc-pull",
        destination_endpoint=destination,
        status=Run.Status.FAILED,
    )
    folder = Path(lab.state_dir) / "data" / "scratch" / door.site
    names = [f"fedprobe-{run.run_tag}-c0-f0", f"fedprobe-{run.run_tag}-c1-f0"]
    try:
        RunCleanup.objects.create(run=run, attempts=1, due_at=timezone.now())
        destination.credential = tokens["read"]
        destination.save()
        for name in names:
            (folder / name).write_bytes(b"left by a killed copy")
        assert run_cleanup(run_id=run.pk) == []  # the read token may not delete
        refused = RunCleanup.objects.get(run=run)
        assert (refused.status, refused.attempts) == ("pending", 1)
        assert "auth" in refused.error, refused.error
        assert set(names) <= set(os.listdir(folder))  # nothing deleted
        destination.credential = tokens["write"]
        destination.save()
        deleted = run_cleanup(run_id=run.pk)
        assert sorted(url.rsplit("/", 1)[-1] for url in deleted) == names
        assert not set(names) & set(os.listdir(folder))
        cleanup = RunCleanup.objects.get(run=run)
        assert (cleanup.status, cleanup.deleted) == ("done", 2)
        for secret in tokens.values():
            assert secret not in cleanup.error
    finally:
        for name in names:
            (folder / name).unlink(missing_ok=True)
