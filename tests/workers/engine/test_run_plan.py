"""What the engine tells the web layer about a run's plan: which files each client reads,
how many bytes each plans and gets, and the run's protocol from URLs checked once."""

from __future__ import annotations

import pytest

from workers.engine.errors import InvalidParams
from workers.engine.params import Method, RunParams, file_collection

A, B, C = (f"root://127.0.0.1:1094//data/{name}" for name in "abc")


def test_clients_share_the_collection_round_robin_files_at_a_time() -> None:
    params = RunParams(urls=(A, B, C), clients=3, files=2)
    assert [params.client_urls(client) for client in range(3)] == [(A, B), (C, A), (B, C)]


def test_each_client_plans_the_needed_bytes_of_its_own_files() -> None:
    params = RunParams(urls=(A, B, C), clients=2, files=2, fraction=0.5)
    assert params.client_planned_bytes({A: 100, B: 1000, C: 11}) == [50 + 500, 6 + 50]


def test_a_copy_delivers_whole_files_and_a_direct_read_what_it_needs() -> None:
    direct = RunParams(urls=(A,), clients=2, files=3, fraction=0.1)
    copy = RunParams(urls=(A,), clients=2, files=3, fraction=0.1, method=Method.COPY)
    assert direct.delivered_bytes(1000) == 100
    assert direct.run_delivered_bytes(1000) == 2 * 3 * 100
    assert copy.delivered_bytes(1000) == 1000
    assert copy.run_delivered_bytes(1000) == 2 * 3 * 1000


def test_the_collection_is_the_first_file_then_others_up_to_files() -> None:
    assert file_collection("a", ["b", "c", "d"], 3) == ["a", "b", "c"]
    assert file_collection("a", ["b"], 3) == ["a", "b"]
    assert file_collection("a", ["b", "c"], 1) == ["a"]


def test_the_copy_for_the_clients_keeps_the_checked_schemes() -> None:
    params = RunParams(urls=(A, B))
    params.validate()
    shared = params.without_credential()
    assert "url_schemes" in shared.__dict__  # not parsed again in the clients
    assert shared.scheme == "root"
    assert shared == params


def test_a_bad_url_is_refused_by_its_field_when_its_scheme_is_asked() -> None:
    with pytest.raises(InvalidParams, match="unknown scheme"):
        _ = RunParams(urls=("gopher://host/f",)).scheme
