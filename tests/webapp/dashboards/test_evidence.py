"""Evidence for a site ticket (docs/evidence.md): the archive of a run measured against the
real lab that fails, opened and checked part by part (README, SVG, CSV, failing runs with
their clients, the other vantage points, versions, commands that reproduce it with the real
xrdcp, no secret); a regression's archive around its change; the pages; who may read."""

from __future__ import annotations

import csv
import io
import json
import shlex
import shutil
import subprocess
import zipfile
from datetime import UTC
from typing import Any
from xml.etree import ElementTree

import pytest
from rest_framework.test import APIClient

from tests.webapp.factories import (
    CampaignFactory,
    VantagePointFactory,
    api_for,
    jwt,
    user,
)
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import run_detail
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint, TestFile

pytestmark = pytest.mark.django_db

FILES = {
    "README.txt",
    "series.svg",
    "series-nights.csv",
    "series-runs.csv",
    "failing-runs.csv",
    "failing-clients.csv",
    "failing-runs.json",
    "other-vantage-points.csv",
    "reproduce.sh",
}
TOKEN = jwt(sub="evidence", exp=4102444800, scope="storage.read:/")


def archive(api: APIClient, url: str) -> tuple[dict[str, str], Any]:
    """The archive at `url`, each file's text by its name (without the folder)."""
    response = api.get(url)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as opened:
        files = {name.split("/", 1)[1]: opened.read(name).decode() for name in opened.namelist()}
        folders = {name.split("/", 1)[0] for name in opened.namelist()}
    return files, (response, folders)


def section(readme: str, heading: str) -> str:
    """The README's paragraph under `heading`."""
    return readme.split(f"\n{heading}\n{'-' * len(heading)}\n\n", 1)[1].split("\n\n", 1)[0]


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def command(files: dict[str, str], tool: str) -> str:
    """The reproduce.sh line that runs `tool`."""
    (line,) = [line for line in files["reproduce.sh"].splitlines() if tool in line.split(" ")[:4]]
    return line


def assert_no_secret(files: dict[str, str], *secrets: str) -> None:
    for name, text in files.items():
        assert "Authorization: Bearer ey" not in text, name
        for secret in secrets:
            assert secret not in text, name


@pytest.fixture
def failing_runs(lab: Any) -> dict[str, Any]:
    """A test of a missing file on the lab's local-root, measured from two vantage points
    in this process (both fail: the site's fault), then a token put on the endpoint."""
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="local-root")
    present = endpoint.files.order_by("size").first()
    assert present is not None
    folder = present.path.rsplit("/", 1)[0]
    missing = TestFile.objects.create(
        endpoint=endpoint, path=f"{folder}/no-such-file.bin", size=1 << 20, is_default=False
    )
    here, there = VantagePointFactory(name="cern-vp"), VantagePointFactory(name="fnal-vp")
    campaign = CampaignFactory(endpoints=[endpoint], vantage_points=[here, there], clients=[2])
    campaign.test_files.set([missing])
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    for run in launched:
        run_execute(run_id=run.pk, worker="test@host")
    runs = {run.vantage_point.name: run_detail(run.pk) for run in launched}
    # What is stored on the endpoint must never reach the archive, nor a server's echo of it.
    Endpoint.objects.filter(pk=endpoint.pk).update(credential_kind="token", credential=TOKEN)
    return {"endpoint": endpoint, "runs": runs, "present": present, "missing": missing}


def test_a_failing_runs_archive_holds_each_part_and_reproduces_with_xrdcp(
    failing_runs: dict[str, Any],
) -> None:
    run, other = failing_runs["runs"]["cern-vp"], failing_runs["runs"]["fnal-vp"]
    assert run.status == other.status == Run.Status.FAILED, run.errors
    files, (response, folders) = archive(
        api_for(user("ana", role="viewer")), f"/api/v1/runs/{run.pk}/evidence/"
    )
    name = f"fedprobe-evidence-run-{run.pk}"
    assert response["Content-Disposition"] == f'attachment; filename="{name}.zip"'
    assert set(files) == FILES and folders == {name}
    check_readme(files["README.txt"], run, other)
    check_series(files, run, other)
    check_commands(files, missing_url=failing_runs["missing"].url)
    assert_no_secret(files, TOKEN, TOKEN.split(".")[1])
    check_xrdcp_reproduces(command(files, "xrdcp"), present=failing_runs["present"].path)


def check_readme(readme: str, run: Run, other: Run) -> None:
    first = run.errors[0]
    what = section(readme, "What is wrong")
    assert "\n" not in what and what.endswith(".")  # one sentence
    assert "no-such-file.bin" in what and "cern-vp" in what
    assert f"failed on {run.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC: " in what
    assert f": {first['class']}: " in what
    assert section(readme, "The site or the path?") == (
        "The other vantage points (fnal-vp) failed the same test in the same window too: "
        "the trouble is at the site (the endpoint), not on one network path."
    )
    assert f"cern-vp (this one): 1 run(s), 1 failed ({first['class']} 1)" in readme
    assert f"fnal-vp: 1 run(s), 1 failed ({other.errors[0]['class']} 1)" in readme
    versions = section(readme, "Versions, TLS and authentication")
    assert f"Server:         {run.server_version or 'not reported'}" in versions
    assert f"Client:         {run.client_version or 'not reported'}" in versions
    assert "TLS:            none" in versions
    assert "the endpoint's credential: a bearer token; never in this archive" in versions
    assert "$BEARER_TOKEN" in readme and "oidc-token" in readme


def check_series(files: dict[str, str], run: Run, other: Run) -> None:
    first = run.errors[0]
    svg = ElementTree.fromstring(files["series.svg"])
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert "✕" in files["series.svg"]  # the failed night is marked
    (series_run,) = rows(files["series-runs.csv"])
    assert (series_run["id"], series_run["status"]) == (str(run.pk), "failed")
    assert series_run["error_class"] == first["class"]
    (failing,) = rows(files["failing-runs.csv"])
    assert (failing["id"], failing["vantage_point"], failing["error_class"]) == (
        str(run.pk),
        "cern-vp",
        first["class"],
    )
    assert "no-such-file.bin" in failing["error_message"]
    (stored,) = json.loads(files["failing-runs.json"])
    assert stored["errors"][0]["class"] == first["class"]
    attempts = list(run.attempts.all())
    assert attempts and all(a.error_class for a in attempts)
    clients = rows(files["failing-clients.csv"])
    assert [(c["client"], c["error_class"]) for c in clients] == [
        (str(a.client), a.error_class) for a in attempts
    ]
    assert [c["client"] for c in stored["clients"]] == [a.client for a in attempts]
    (elsewhere,) = rows(files["other-vantage-points.csv"])
    assert (elsewhere["id"], elsewhere["vantage_point"], elsewhere["status"]) == (
        str(other.pk),
        "fnal-vp",
        "failed",
    )


def check_commands(files: dict[str, str], *, missing_url: str) -> None:
    probe = command(files, "workers.engine")
    assert probe.startswith(f"python -m workers.engine {missing_url} --method direct ")
    assert "--pattern random --read-size 65536 --fraction 0.1 --clients 2" in probe
    assert probe.endswith('--token-file "$BEARER_TOKEN_FILE"')
    assert probe in files["README.txt"]
    xrdcp = command(files, "xrdcp")
    assert xrdcp == (
        'BEARER_TOKEN_FILE="$BEARER_TOKEN_FILE" XrdSecPROTOCOL=ztn '
        f"xrdcp --force --nopbar {missing_url} /dev/null"
    )


def check_xrdcp_reproduces(xrdcp: str, *, present: str) -> None:
    """The line, run as an admin would (anonymously: the lab's door takes anyone), fails as
    the run did; for a file that is there, it succeeds."""
    if shutil.which("xrdcp") is None:
        pytest.skip("xrdcp is not installed: the command is not run")
    words = shlex.split(xrdcp.split("XrdSecPROTOCOL=ztn ", 1)[1])
    failed = subprocess.run(words, capture_output=True, text=True, timeout=30, check=False)
    assert failed.returncode != 0
    assert "no such file" in failed.stderr.lower()
    there = words[-2].replace("no-such-file.bin", present.rsplit("/", 1)[1])
    works = subprocess.run(
        [*words[:-2], there, "/dev/null"], capture_output=True, timeout=30, check=False
    )
    assert works.returncode == 0, works.stderr
