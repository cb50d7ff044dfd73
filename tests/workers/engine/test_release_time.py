"""The run JSON says when the clients were released, so phases have a wall-clock origin."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, lab_file
from workers.engine import Method, Pattern, RunParams, run_probe

pytestmark = pytest.mark.lab


def test_release_time_lies_between_the_start_and_the_end_of_the_run(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    before = datetime.now().astimezone()
    run = run_probe(
        RunParams(
            urls=(url,),
            method=Method.DIRECT,
            pattern=Pattern.SEQUENTIAL,
            read_size=65536,
            fraction=0.5,
            clients=2,
        )
    ).to_json()
    after = datetime.now().astimezone()

    assert run["status"] == "succeeded", run["errors"]
    released = datetime.fromisoformat(run["released_at"])
    assert before <= released <= after - timedelta(seconds=run["wall_s"])
    first_read = min(
        phase["start_s"]
        for client in run["clients"]
        for phase in client["phases"]
        if phase["phase"] == "read"
    )
    assert released + timedelta(seconds=first_read) < after


def test_a_run_refused_before_its_clients_start_has_no_release_time() -> None:
    run = run_probe(
        RunParams(
            urls=("root://127.0.0.1:1/none",),
            method=Method.DIRECT,
            pattern=Pattern.SEQUENTIAL,
            read_size=65536,
            fraction=0.5,
            clients=1,
            timeout_s=5,
        )
    ).to_json()
    assert run["status"] != "succeeded"
    assert run["released_at"] is None
