"""Traces in the web app (issue 20 item 6): an upload is checked by the engine's parser (a bad
line is refused naming it, on the field `trace`), too big, a taken name and the same CSV twice
are refused and nothing is stored; a trace a campaign replays is not deleted; a replay
campaign needs a trace, and its runs read the recorded paths on their endpoint; the worker
gets the text in a private 0600 file, removed after, and never a path from another host."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from django.db.models import ProtectedError

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    api_for,
    page_for,
    user,
)
from webapp.campaigns.configuration.export import configuration_export
from webapp.campaigns.configuration.importing import configuration_import
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch, run_trace_text
from webapp.campaigns.traces import MAX_TRACE_TEXT, Trace, params_with_trace, trace_create
from workers.engine.errors import InvalidParams
from workers.engine.params import Operation, RunParams

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parents[2] / "workers" / "engine" / "data"
JOB = (DATA / "recorded-job.csv").read_text()  # file-4M then file-1M
FIRST_FILE = "".join(JOB.splitlines(keepends=True)[:11])  # file-4M only
TRACES = "/api/v1/traces/"


def upload(api: Any, name: str = "job", text: str = JOB) -> Any:
    return api.post(TRACES, {"name": name, "trace": text}, format="json")


def test_an_upload_stores_what_the_engine_reads_in_it() -> None:
    answer = upload(api_for(user("olga")))
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert "trace" not in body  # the CSV is not echoed
    assert body["files"] == ["/fedprobe/file-4M", "/fedprobe/file-1M"]
    # Opens, reads, the vector read and closes; the Stat is left out.
    assert body["operations"] == 14
    assert body["left_out"] == {"Stat": 1}
    assert body["bytes_read"] == 4 * 65536 + 28672 + 3 * 131072 + 1048576 + 100
    assert body["duration_s"] == pytest.approx(0.107529, abs=1e-5)
    assert body["sha256"] == hashlib.sha256(JOB.encode()).hexdigest()
    assert body["owner"] == "olga"
    listed = api_for(user("vera", role="viewer")).get(TRACES).json()
    assert [t["name"] for t in listed["results"]] == ["job"]


def test_a_bad_line_is_refused_naming_it_on_the_field_trace() -> None:
    lines = JOB.splitlines(keepends=True)
    lines[2] = lines[2].replace('"0;65536;0"', '"0;x;0"')
    answer = upload(api_for(user("olga")), text="".join(lines))
    assert answer.status_code == 400
    (message,) = answer.json()["trace"]
    assert message.startswith("line 3: "), message
    assert not Trace.objects.exists()


def test_a_trace_over_4_mib_is_refused_naming_the_field() -> None:
    big = JOB + '"1","Stat","1795929328.5","false;0","1795929328.6","[SUCCESS]",""\n' * (
        MAX_TRACE_TEXT // 60
    )
    assert len(big.encode()) > MAX_TRACE_TEXT
    answer = upload(api_for(user("olga")), text=big)
    assert answer.status_code == 400, answer.content
    assert "more than 4194304" in answer.json()["trace"][0]
    assert not Trace.objects.exists()


def test_a_taken_name_and_the_same_csv_twice_are_refused() -> None:
    api = api_for(user("olga"))
    assert upload(api).status_code == 201
    taken = upload(api, text=JOB + JOB.splitlines(keepends=True)[-1])
    assert taken.status_code == 400
    assert "a trace named 'job' exists already" in taken.json()["name"][0]
    again = upload(api, name="job-2")
    assert again.status_code == 400
    assert "stored already, as 'job'" in again.json()["trace"][0]
    assert Trace.objects.count() == 1


def test_viewers_read_operators_upload_and_only_the_owner_deletes() -> None:
    assert upload(api_for(user("vera", role="viewer"))).status_code == 403
    trace = Trace.objects.get(pk=upload(api_for(user("olga"))).json()["id"])
    assert api_for(user("otto")).delete(f"{TRACES}{trace.pk}/").status_code == 403
    assert api_for(user("ada", role="admin")).delete(f"{TRACES}{trace.pk}/").status_code == 204
    assert not Trace.objects.exists()


def test_a_trace_a_campaign_replays_is_not_deleted() -> None:
    olga = user("olga")
    trace = trace_create(name="job", text=JOB, owner=olga)
    CampaignFactory(name="nightly-replay", operations=["replay"], trace=trace)
    answer = api_for(olga).delete(f"{TRACES}{trace.pk}/")
    assert answer.status_code == 400
    assert "replayed by campaign nightly-replay" in answer.json()["trace"][0]
    with pytest.raises(ProtectedError):  # and not by the database either
        trace.delete()
    assert Trace.objects.filter(pk=trace.pk).exists()


def replay_endpoint() -> Any:
    endpoint = EndpointFactory(base_url="root://replay.example:1094")
    TestFileFactory(endpoint=endpoint, path="/fedprobe/file-4M", size=4 * 1024 * 1024)
    return endpoint


def campaign_body(endpoint: Any, **fields: Any) -> dict[str, Any]:
    return {
        "name": "replay",
        "endpoints": [endpoint.pk],
        "operations": ["replay"],
        "methods": ["direct"],
        "patterns": ["sequential"],
        "read_sizes": [65536],
        "fractions": [1],
        "clients": [1],
        **fields,
    }


def test_a_replay_campaign_needs_a_trace_and_its_runs_read_the_recorded_paths() -> None:
    olga = user("olga")
    api = api_for(olga)
    endpoint = replay_endpoint()
    refused = api.post("/api/v1/campaigns/", campaign_body(endpoint), format="json")
    assert refused.status_code == 400
    assert "replay needs a trace" in refused.json()["trace"][0]
    assert not Campaign.objects.exists()
    trace = trace_create(name="job", text=JOB, owner=olga)
    made = api.post("/api/v1/campaigns/", campaign_body(endpoint, trace=trace.pk), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["trace"] == trace.pk
    assert made.json()["planned_bytes"] == trace.bytes_read  # one client, the recorded bytes
    campaign = Campaign.objects.get()
    (run,) = campaign_launch(campaign=campaign, trigger="api")
    params = run.measured_params()
    assert params.operation == Operation.REPLAY
    assert params.urls == (
        "root://replay.example:1094//fedprobe/file-4M",
        "root://replay.example:1094//fedprobe/file-1M",
    )
    assert params.trace is None  # a path only on the worker that measures it


def test_a_replay_run_replays_the_trace_it_was_launched_with_and_says_which() -> None:
    """The campaign's trace changed after a launch: its queued runs replay the one they were
    launched with (the worker's text, the URLs), the run JSON and page say which (name,
    sha256); the next launch replays the new one; a trace runs replayed is not deleted."""
    olga = user("olga")
    api = api_for(olga)
    first = trace_create(name="job", text=JOB, owner=olga)
    second = trace_create(name="job-4M", text=FIRST_FILE, owner=olga)
    campaign = CampaignFactory(
        name="nightly-replay",
        owner=olga,
        endpoints=[replay_endpoint()],
        operations=["replay"],
        trace=first,
        clients=[1],
    )
    (run,) = campaign_launch(campaign=campaign, trigger="api")
    changed = api.patch(f"/api/v1/campaigns/{campaign.pk}/", {"trace": second.pk}, format="json")
    assert changed.status_code == 200, changed.content
    run = Run.objects.get(pk=run.pk)
    assert run.trace == first and run.campaign.trace == second
    assert run_trace_text(run) == JOB
    assert [url.rsplit("/", 1)[-1] for url in run.measured_params().urls] == [
        "file-4M",
        "file-1M",
    ]
    shown = api.get(f"/api/v1/runs/{run.pk}/").json()["trace"]
    assert shown == {"id": first.pk, "name": "job", "sha256": first.sha256}
    page = page_for(olga).get(f"/runs/{run.pk}/").content.decode()
    assert f"<code>{first.sha256}</code>" in page
    assert "(the campaign replays another trace since)" in page
    campaign.refresh_from_db()
    (again,) = campaign_launch(campaign=campaign, trigger="api", if_idle=False)
    assert again.trace == second and run_trace_text(again) == FIRST_FILE
    assert RunFactory().trace is None  # a read replays nothing
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["trace"]["name"] == "job"  # still

    refused = api.delete(f"{TRACES}{first.pk}/")
    assert refused.status_code == 400
    assert "'job' was replayed by 1 run, which say they replayed it" in refused.json()["trace"][0]
    with pytest.raises(ProtectedError):  # and not by the database either
        first.delete()
    on_page = page_for(olga).post(f"/traces/{first.pk}/delete/", follow=True).content.decode()
    assert "Not deleted: trace: &#x27;job&#x27; was replayed by 1 run" in on_page
    campaign.delete()  # its runs with it: nothing says it replayed the trace any more
    assert api.delete(f"{TRACES}{first.pk}/").status_code == 204


def test_the_form_offers_traces_and_refuses_replay_without_one() -> None:
    olga = user("olga")
    trace = trace_create(name="job", text=JOB, owner=olga)
    page = page_for(olga)
    shown = page.get("/campaigns/new/").content.decode()
    assert f'<option value="{trace.pk}">job</option>' in shown
    assert "must hold them" in shown
    endpoint = replay_endpoint()
    data = {
        "name": "replay",
        "endpoints": [endpoint.pk],
        "operations": ["replay"],
        "methods": "direct",
        "patterns": "sequential",
        "read_sizes": "64k",
        "fractions": "1",
        "clients": "1",
    }
    refused = page.post("/campaigns/new/", data).content.decode()
    assert "trace: replay needs a trace" in refused
    saved = page.post("/campaigns/new/", {**data, "trace": trace.pk})
    assert saved.status_code == 302
    campaign = Campaign.objects.get()
    assert campaign.trace == trace
    detail = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "<code>/fedprobe/file-4M</code>, <code>/fedprobe/file-1M</code> on each" in detail


def test_the_traces_page_uploads_and_shows_a_bad_line_on_its_field() -> None:
    page = page_for(user("olga"))
    bad = JOB.replace('"Close","1795929328.411008835","0"', '"Close","soon","0"')
    answer = page.post("/traces/", {"name": "job", "trace": _file(bad)})
    assert answer.status_code == 400
    text = answer.content.decode()
    assert 'id="id_trace_error"' in text and "trace: line 11: " in text
    assert not Trace.objects.exists()
    big = page.post("/traces/", {"name": "job", "trace": _file("x" * (MAX_TRACE_TEXT + 1))})
    assert "trace: has 4194305 bytes, more than 4194304 (4 MiB)" in big.content.decode()
    done = page.post("/traces/", {"name": "job", "trace": _file(JOB)})
    assert done.status_code == 302
    listing = page.get("/traces/").content.decode()
    assert "<code>/fedprobe/file-4M</code><br><code>/fedprobe/file-1M</code>" in listing
    assert page_for(user("vera", role="viewer")).get("/traces/").status_code == 403


def test_a_page_delete_of_a_trace_in_use_says_which_campaign() -> None:
    olga = user("olga")
    trace = trace_create(name="job", text=JOB, owner=olga)
    CampaignFactory(name="nightly-replay", operations=["replay"], trace=trace)
    answer = page_for(olga).post(f"/traces/{trace.pk}/delete/", follow=True)
    assert "Not deleted: trace: &#x27;job&#x27; is replayed by campaign nightly-replay" in (
        answer.content.decode()
    )
    assert Trace.objects.filter(pk=trace.pk).exists()


def _file(text: str) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("job.csv", text.encode(), content_type="text/csv")


def test_the_worker_gets_the_trace_in_a_private_file_removed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEDPROBE_SECRETS_DIR", str(tmp_path / "secrets"))
    params = RunParams(urls=("root://h//a",), operation=Operation.REPLAY)
    with params_with_trace(params, JOB) as given:
        assert given.trace is not None
        path = Path(given.trace)
        assert path.read_text() == JOB
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists() and not path.parent.exists()
    read = RunParams(urls=("root://h//a",))
    with params_with_trace(read, JOB) as unchanged:
        assert unchanged is read
    assert os.listdir(tmp_path / "secrets") == []


def test_a_trace_path_from_another_host_is_never_taken() -> None:
    sent = RunParams(
        urls=("root://h//a",), operation=Operation.REPLAY, trace="/etc/shadow"
    ).to_json()
    assert RunParams.from_json(sent).trace is None
    with pytest.raises(InvalidParams) as refused:
        RunParams.from_json({**sent, "tracefile": "x"})
    assert refused.value.field == "tracefile"


def test_configuration_as_code_names_the_trace_which_must_be_uploaded() -> None:
    olga = user("olga")
    trace = trace_create(name="job", text=JOB, owner=olga)
    campaign = CampaignFactory(
        name="replay", endpoints=[replay_endpoint()], operations=["replay"], trace=trace
    )
    text = configuration_export(campaigns=[campaign])
    assert "  trace: job\n" in text
    again = configuration_import(text=text, as_user=None, dry_run=False)
    assert again.errors == [] and {s.action for s in again.plan} == {"unchanged"}
    elsewhere = configuration_import(
        text=text.replace("trace: job", "trace: not-uploaded"), as_user=None, dry_run=False
    )
    assert [(e.path, e.message) for e in elsewhere.errors] == [
        ("campaigns[0].trace", "no such trace: upload it (Traces) first")
    ]
    assert Campaign.objects.get().trace == trace


def test_the_recorded_paths_are_read_at_the_same_paths_over_either_protocol() -> None:
    trace = trace_create(name="job", text=JOB, owner=None)
    assert trace.urls_at("https://door.example:8443/") == (
        "https://door.example:8443/fedprobe/file-4M",
        "https://door.example:8443/fedprobe/file-1M",
    )
    assert trace.urls_at("roots://door.example:1095") == (
        "roots://door.example:1095//fedprobe/file-4M",
        "roots://door.example:1095//fedprobe/file-1M",
    )
