"""The run JSON names the client library or tool a run's clients used (client_version), as
that client reports its own version, found once per process. (A real lab run's is checked
where it is also stored: tests/webapp/campaigns/test_campaign_services.py.)"""

from __future__ import annotations

import subprocess

import httpcore
import httpx
import XRootD.client

from workers.engine.backends import backend_for
from workers.engine.backends.tools import tool_version
from workers.engine.params import Method, RunParams
from workers.engine.results import RunResult


def _reported(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()


def test_root_reads_name_the_bindings_and_copies_the_xrdcp_on_path() -> None:
    root = backend_for("root")
    assert root.client_version(copies=False) == (
        f"xrootd {XRootD.client.__version__} (Python bindings)"
    )
    assert root.client_version(copies=True) == f"xrdcp {_reported('xrdcp', '--version')}"


def test_http_names_httpx_and_gridftp_names_globus_url_copy() -> None:
    httpx_version = f"httpx {httpx.__version__} (httpcore {httpcore.__version__})"
    for scheme in ("http", "https", "davs"):
        for copies in (False, True):
            assert backend_for(scheme).client_version(copies=copies) == httpx_version
    said = _reported("globus-url-copy", "-version")  # "globus-url-copy: 10.12"
    assert backend_for("gsiftp").client_version(copies=True) == said.replace(":", "", 1)
    assert backend_for("file").client_version(copies=False) is None


def test_a_tool_is_asked_its_version_once_per_process_and_a_missing_one_gives_none() -> None:
    tool_version.cache_clear()
    for _ in range(3):
        backend_for("root").client_version(copies=True)
    assert tool_version.cache_info().misses == 1
    assert tool_version("fedprobe-no-such-tool", "--version") is None


def test_the_run_json_carries_the_client_version_of_the_run() -> None:
    result = RunResult(
        params=RunParams(urls=("root://a:1094//f",), method=Method.COPY),
        started_at="2026-11-28T00:00:00+00:00",
        host="worker",
        deadline_s=1.0,
        client_version="xrdcp v5.5.3",
    )
    assert result.to_json()["client_version"] == "xrdcp v5.5.3"
