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
from datetime import UTC, date, datetime, timedelta
from typing import Any
from xml.etree import ElementTree

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RegressionFactory,
    RunFactory,
    SeriesNightFactory,
    VantagePointFactory,
    api_for,
    jwt,
    page_for,
    proxy_key,
    proxy_pem,
    user,
)
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.selectors import run_detail
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.dashboards.reproduce import reproduce_commands
from webapp.dashboards.selectors.evidence import VantageOutcome, site_or_path
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint, TestFile
from webapp.watch.models import Regression, SeriesNight

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


def planted_run(endpoint: Endpoint, vantage_point: str, at: datetime, **fields: Any) -> Run:
    """A run of `endpoint`'s test file made at `at` (runs' creation time is automatic)."""
    test_file = endpoint.files.first() or TestFile.objects.create(
        endpoint=endpoint, path="/data/file-16M", size=16 << 20, is_default=True
    )
    run = RunFactory(
        test_file=test_file, vantage_point=VantagePointFactory(name=vantage_point), **fields
    )
    Run.objects.filter(pk=run.pk).update(created_at=at)
    run.refresh_from_db()
    return run


@pytest.fixture
def slower() -> Regression:
    """A throughput regression of cern-vp's series: 100 MB/s until 2026-11-19, 60 from the
    20th; fnal-vp's series of the same test stays at 100 (the path's, not the site's)."""
    endpoint = EndpointFactory(name="door", protocol="root", base_url="root://door.example:1094/")
    regression = RegressionFactory(
        endpoint=endpoint, vantage_point=VantagePointFactory(name="cern-vp")
    )
    vantage_points = {name: VantagePointFactory(name=name) for name in ("cern-vp", "fnal-vp")}
    nights = []
    for day in range(31):
        night = date(2026, 10, 25) + timedelta(days=day)
        for name, after in (("cern-vp", 60.0), ("fnal-vp", 100.0)):
            value = after if night >= date(2026, 11, 20) else 100.0
            nights.append(
                SeriesNightFactory.build(
                    endpoint=endpoint,
                    vantage_point=vantage_points[name],
                    night=night,
                    metrics={"throughput_mbps": {"median": value, "n": 4}},
                )
            )
    SeriesNight.objects.bulk_create(nights)
    for name, mbps in (("cern-vp", 60.0), ("fnal-vp", 101.0)):
        planted_run(
            endpoint,
            name,
            datetime(2026, 11, 22, 2, tzinfo=UTC),
            status=Run.Status.SUCCEEDED,
            throughput_mbps=mbps,
            server_version="v5.7.0",
            client_version="xrootd 5.7.0",
            auth="none",
        )
    return regression


def test_a_regressions_archive_shows_its_series_around_the_change(slower: Regression) -> None:
    files, (response, _) = archive(
        api_for(user("bo", role="viewer")), f"/api/v1/regressions/{slower.pk}/evidence/"
    )
    assert response["Content-Disposition"] == (
        f'attachment; filename="fedprobe-evidence-regression-{slower.pk}.zip"'
    )
    readme = files["README.txt"]
    assert section(readme, "What is wrong") == "throughput down 40% since 2026-11-20"
    assert "Change night:  2026-11-20" in readme and "100 -> 60 MB/s" in readme
    assert section(readme, "The site or the path?") == (
        "The other vantage points saw no such change of throughput_mbps in the same window "
        "(fnal-vp +0%; cern-vp -40%): the change is on the path from cern-vp (its network or "
        "its side), not at the site."
    )
    nights = rows(files["series-nights.csv"])
    assert list(nights[0]) == [
        "vantage_point", "night", "runs", "succeeded", "partial", "failed", "tester_faults",
        "errors", "metric", "value", "server_versions", "client_versions",
    ]  # fmt: skip
    own = [(n["night"], float(n["value"])) for n in nights if n["vantage_point"] == "cern-vp"]
    assert own[0] == ("2026-10-25", 100.0)  # the baseline window on, all of it planted
    assert ("2026-11-19", 100.0) in own and ("2026-11-20", 60.0) in own
    assert own[-1][0] == "2026-11-24"  # the last night evaluated
    svg = ElementTree.fromstring(files["series.svg"])
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 2  # cern-vp's and fnal-vp's
    assert "change 2026-11-20" in files["series.svg"]
    (run,) = rows(files["series-runs.csv"])
    assert (run["status"], run["throughput_mbps"], run["server_version"]) == (
        "succeeded",
        "60.0",
        "v5.7.0",
    )
    assert "Server:         v5.7.0" in readme and "xrdcp --force --nopbar" in readme
    assert "read anonymously" in readme


def test_the_archive_never_holds_a_secret_even_one_a_server_echoed(
    slower: Regression,
) -> None:
    """A token and a proxy stored on the endpoint, and a server that quoted the request's
    Authorization header in its error: no file of the archive holds any of them."""
    endpoint = slower.endpoint
    assert endpoint is not None
    pem = proxy_pem()
    Endpoint.objects.filter(pk=endpoint.pk).update(
        protocol="https", base_url="https://door.example:8443", credential_kind="token",
        credential=TOKEN,
    )  # fmt: skip
    echoed = f"403 from door: request had Authorization: Bearer {TOKEN} and {pem}"
    failed = planted_run(
        Endpoint.objects.get(pk=endpoint.pk),
        "cern-vp",
        datetime(2026, 11, 23, 2, tzinfo=UTC),
        status=Run.Status.FAILED,
        errors=[{"class": "auth", "message": echoed, "client": None}],
        auth="token",
        tls={"version": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384"},
    )
    ClientAttempt.objects.create(
        run=failed, client=0, status="failed", heartbeat_at=failed.created_at,
        error_class="auth", error_message=echoed, record={"error": {"message": echoed}},
    )  # fmt: skip
    api = api_for(user("cy", role="viewer"))
    for url in (
        f"/api/v1/regressions/{slower.pk}/evidence/",
        f"/api/v1/runs/{failed.pk}/evidence/",
    ):
        files, _ = archive(api, url)
        assert_no_secret(files, TOKEN, TOKEN.split(".")[1], proxy_key(pem))
        assert "403 from door" in files["failing-runs.csv"]
        assert "403 from door" in files["failing-clients.csv"]
    curl = command(files, "curl")
    assert '-H "Authorization: Bearer $BEARER_TOKEN"' in curl
    assert curl.endswith(" https://door.example:8443/data/file-16M")
    # davix-get would carry the token's header to wherever the door redirects it.
    assert "davix-get" not in files["reproduce.sh"]
    assert "TLS:            TLSv1.3 TLS_AES_256_GCM_SHA384" in files["README.txt"]
    assert "Authentication: token" in files["README.txt"]
    page = page_for(user("di", role="viewer")).get(f"/runs/{failed.pk}/evidence/")
    html = page.content.decode()
    assert page.status_code == 200 and "403 from door" in html
    assert TOKEN not in html and proxy_key(pem) not in html
    assert "Authorization: Bearer ey" not in html


def test_the_pages_link_to_the_evidence_and_show_what_the_archive_holds(
    slower: Regression,
) -> None:
    page = page_for(user("ed", role="viewer"))
    run = Run.objects.get(vantage_point__name="cern-vp")
    assert f'href="/runs/{run.pk}/evidence/"' in page.get(f"/runs/{run.pk}/").content.decode()
    detail = page.get(f"/regressions/{slower.pk}/").content.decode()
    assert f'href="/regressions/{slower.pk}/evidence/"' in detail
    html = page.get(f"/regressions/{slower.pk}/evidence/").content.decode()
    assert "throughput down 40% since 2026-11-20" in html
    assert "the change is on the path from cern-vp" in html
    assert f'href="/api/v1/regressions/{slower.pk}/evidence/"' in html
    assert "<svg" in html and "xrdcp --force --nopbar root://door.example:1094/" in html


def test_a_group_regression_has_no_evidence_of_its_own(slower: Regression) -> None:
    group = RegressionFactory(endpoint=None, vantage_point=VantagePointFactory(name="cern-vp"))
    group.method = ""
    group.save(update_fields=["method"])
    api = api_for(user("fa", role="viewer"))
    answer = api.get(f"/api/v1/regressions/{group.pk}/evidence/")
    assert answer.status_code == 409 and "members" in answer.json()["detail"]
    page = page_for(user("gu", role="viewer")).get(f"/regressions/{group.pk}/evidence/")
    assert page.status_code == 409
    assert (
        "evidence"
        not in page_for(user("ha", role="viewer"))
        .get(f"/regressions/{group.pk}/")
        .content.decode()
        .split('id="regression-title"', 1)[0]
    )


def test_only_users_who_may_see_the_run_get_its_evidence(slower: Regression) -> None:
    run = Run.objects.get(vantage_point__name="cern-vp")
    urls = [
        f"/api/v1/runs/{run.pk}/evidence/",
        f"/api/v1/regressions/{slower.pk}/evidence/",
    ]
    nobody = User.objects.create_user("no-role")
    for url in urls:
        assert api_for(nobody).get(url).status_code == 403
        assert APIClient().get(url).status_code in (401, 403)
    for url in (f"/runs/{run.pk}/evidence/", f"/regressions/{slower.pk}/evidence/"):
        assert page_for(nobody).get(url).status_code == 403
        assert Client().get(url).status_code == 302  # to the login page
    viewer = api_for(user("ida", role="viewer"))
    asked = viewer.get(urls[0], HTTP_ACCEPT="application/zip")
    assert (asked.status_code, asked["Content-Type"]) == (200, "application/zip")
    assert viewer.get("/api/v1/runs/999999/evidence/").status_code == 404
    assert viewer.get("/api/v1/regressions/999999/evidence/").status_code == 404


def outcome(name: str, runs: int, failed: int) -> VantageOutcome:
    classes = {"not-found": failed} if failed else {}
    return VantageOutcome(name, runs, failed, 0, classes, "not-found: gone" if failed else "")


@pytest.mark.parametrize(
    ("outcomes", "says"),
    [
        (
            [outcome("cern-vp", 2, 2), outcome("fnal-vp", 3, 0), outcome("ral-vp", 1, 0)],
            "The other vantage points (fnal-vp, ral-vp) ran the same test in the same window "
            "without failing: the trouble is on the path from cern-vp",
        ),
        (
            [outcome("cern-vp", 2, 2), outcome("fnal-vp", 3, 3), outcome("ral-vp", 1, 0)],
            "Some other vantage points failed the same test in the same window (fnal-vp) and "
            "some did not (ral-vp)",
        ),
        (
            [outcome("cern-vp", 2, 1), outcome("fnal-vp", 0, 0)],
            "No other vantage point ran this test in the comparison window, so the data "
            "cannot tell the site from the path",
        ),
        (
            [outcome("cern-vp", 2, 0), outcome("fnal-vp", 1, 0)],
            "No run of this test failed from cern-vp in the comparison window nor from the "
            "other vantage points",
        ),
    ],
)
def test_the_site_or_the_path_is_said_from_the_other_vantage_points(
    outcomes: list[VantageOutcome], says: str
) -> None:
    assert site_or_path(outcomes).startswith(says)


@pytest.mark.parametrize(
    ("protocol", "url", "kind", "tool", "line"),
    [
        (
            "davs", "davs://se.example:2880", "token", "curl",
            "curl --fail --silent --show-error --location -o /dev/null -r 0-65535 -w "
            "'%{http_code} %{size_download} B in %{time_total} s\\n' -H \"Authorization: "
            'Bearer $BEARER_TOKEN" --capath /etc/grid-security/certificates '
            "https://se.example:2880/data/f",
        ),
        (
            "https", "https://se.example:443", "x509-proxy", "davix-get",
            'davix-get --cert "$X509_USER_PROXY" --capath /etc/grid-security/certificates '
            "https://se.example:443/data/f /dev/null",
        ),
        (
            "root", "root://se.example:1094/", "x509-proxy", "xrdcp",
            'X509_USER_PROXY="$X509_USER_PROXY" X509_CERT_DIR=/etc/grid-security/certificates '
            "XrdSecPROTOCOL=gsi xrdcp --force --nopbar root://se.example:1094//data/f /dev/null",
        ),
        (
            "gsiftp", "gsiftp://se.example:2811", "x509-proxy", "globus-url-copy",
            'X509_USER_PROXY="$X509_USER_PROXY" globus-url-copy -vb '
            "gsiftp://se.example:2811/data/f file:///dev/null",
        ),
        (
            "http", "http://alice:s3cret@se.example:8000", "none", "curl",
            "curl --fail --silent --show-error --location -o /dev/null -r 0-65535 -w "
            "'%{http_code} %{size_download} B in %{time_total} s\\n' "
            "http://se.example:8000/data/f",
        ),
    ],
)  # fmt: skip
def test_each_protocol_has_its_grid_tools_line_without_a_secret(
    protocol: str, url: str, kind: str, tool: str, line: str
) -> None:
    endpoint = Endpoint(name="se", protocol=protocol, base_url=url, credential_kind=kind)
    run = Run(
        pk=7, endpoint=endpoint, test_file=TestFile(endpoint=endpoint, path="/data/f", size=1),
        method="direct", pattern="random", read_size=65536, fraction=0.1, clients=1,
    )  # fmt: skip
    commands = {command.tool: command.line for command in reproduce_commands(run)}
    assert commands[tool] == line
    probe = commands["fedprobe probe"]
    assert probe.startswith("python -m workers.engine ") and "--seed 7" in probe
    assert "s3cret" not in " ".join(commands.values())


def test_a_run_ended_by_fedprobes_own_fault_says_no_ticket_is_needed(slower: Regression) -> None:
    assert slower.endpoint is not None
    refused = planted_run(
        slower.endpoint,
        "cern-vp",
        datetime(2026, 11, 23, 2, tzinfo=UTC),
        status=Run.Status.FAILED,
        errors=[{"class": "egress", "message": "refused: 10.0.0.1 is private", "client": None}],
    )
    files, _ = archive(api_for(user("jo", role="viewer")), f"/api/v1/runs/{refused.pk}/evidence/")
    assert section(files["README.txt"], "What is wrong").endswith(
        ": egress: refused: 10.0.0.1 is private; this is fedprobe's own fault, not the site's: "
        "no ticket is needed."
    )
    assert rows(files["failing-runs.csv"]) == []  # never counted against the site


def test_the_probe_line_presents_the_credential_where_the_run_did() -> None:
    """A run presents its token to the endpoint's credential_hosts too (redirect targets);
    without them, the line pasted by hand would fail at the redirect where the run did not."""
    endpoint = Endpoint(
        name="se", protocol="root", base_url="root://redirector.example:1094",
        credential_kind="token", credential_hosts=["disk1.example", ".pool.example"],
    )  # fmt: skip
    run = Run(
        pk=7, endpoint=endpoint, test_file=TestFile(endpoint=endpoint, path="/data/f", size=1),
        method="direct", pattern="random", read_size=65536, fraction=0.1, clients=1,
    )  # fmt: skip
    probe = {c.tool: c.line for c in reproduce_commands(run)}["fedprobe probe"]
    assert "--credential-host disk1.example --credential-host .pool.example" in probe
    anonymous = Endpoint(
        name="se", protocol="root", base_url="root://redirector.example:1094",
        credential_hosts=["disk1.example"],
    )  # fmt: skip
    run.endpoint = anonymous
    assert "--credential-host" not in reproduce_commands(run)[0].line


def test_the_page_never_shows_a_stored_credential_the_redaction_does_not_recognise(
    slower: Regression,
) -> None:
    """An opaque token (no JWT, no "Bearer" before it) echoed by a server: the archive's
    last guard cuts it; the page must too."""
    endpoint = slower.endpoint
    assert endpoint is not None
    opaque = "MDAxY2xvY2F0aW9uIG9wYXF1ZS1tYWNhcm9vbi1zM2NyZXQ"
    Endpoint.objects.filter(pk=endpoint.pk).update(credential_kind="token", credential=opaque)
    echoed = f"403 from door: macaroon {opaque} refused"
    failed = planted_run(
        Endpoint.objects.get(pk=endpoint.pk),
        "cern-vp",
        datetime(2026, 11, 23, 2, tzinfo=UTC),
        status=Run.Status.FAILED,
        errors=[{"class": "auth", "message": echoed, "client": None}],
    )
    files, _ = archive(api_for(user("cy", role="viewer")), f"/api/v1/runs/{failed.pk}/evidence/")
    assert_no_secret(files, opaque)
    page = page_for(user("di", role="viewer")).get(f"/runs/{failed.pk}/evidence/")
    html = page.content.decode()
    assert page.status_code == 200 and "403 from door: macaroon" in html
    assert opaque not in html
