"""Bounds of a run's parameters: bad input names its field and starts nothing."""

from collections.abc import Sequence

import pytest

from workers.engine.backends.base import AsyncRecorder, RemoteFile, VectorLimits
from workers.engine.errors import InvalidParams
from workers.engine.params import (
    DEADLINE_MARGIN_S,
    FILE_ROUND_TRIPS,
    MAX_TIMEOUT_S,
    MIN_RATE_BPS,
    MIN_ROUND_TRIP_S,
    RTT_FACTOR,
    Method,
    Pattern,
    RunParams,
)
from workers.engine.patterns import plan_requests, vector_batches
from workers.engine.readahead import ReadAheadFile

URL = "root://127.0.0.1:1094//data/file"
MiB = 1024**2
GiB = 1024**3
WAN_RTT_S = 0.026


def params(**changes: object) -> RunParams:
    values: dict[str, object] = {"urls": (URL,)}
    values.update(changes)
    return RunParams(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"urls": ("gopher://host/f",)}, "url"),
        ({"urls": ("-rf",)}, "url"),
        ({"urls": ("--help",)}, "url"),
        ({"urls": ("root:///no-host",)}, "url"),
        ({"urls": ("root://host:1094/",)}, "url"),
        ({"urls": ("root://host//f ile",)}, "url"),
        ({"urls": ()}, "url"),
        ({"urls": (URL, "http://127.0.0.1:8000/data/file")}, "url"),
        ({"fraction": 0.0}, "fraction"),
        ({"fraction": 1.5}, "fraction"),
        ({"fraction": -0.1}, "fraction"),
        ({"read_size": 0}, "read_size"),
        ({"read_size": 64 * 1024 * 1024 + 1}, "read_size"),
        ({"clients": 0}, "clients"),
        ({"clients": 257}, "clients"),
        ({"depth": 0}, "depth"),
        ({"depth": 1025}, "depth"),
        ({"vector_size": 1025}, "vector_size"),
        ({"streams": 0}, "streams"),
        ({"files": 0}, "files"),
        ({"timeout_s": MAX_TIMEOUT_S + 1}, "timeout"),
        ({"timeout_s": 0.0}, "timeout"),
        ({"adler32": ((URL, "xyz"),)}, "adler32"),
        ({"method": "teleport"}, "method"),
        ({"pattern": "zigzag"}, "pattern"),
        ({"pattern": Pattern.VECTOR, "readahead": 4096}, "readahead"),
        ({"urls": ("gsiftp://host:2811/f",), "method": Method.DIRECT}, "method"),
        ({"urls": ("file:///etc/passwd",), "file_roots": ("/srv/data",)}, "url"),
    ],
)
def test_out_of_bounds_parameter_is_refused_naming_its_field(
    changes: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidParams) as caught:
        params(**changes).validate()
    assert caught.value.field == field


def test_bounds_themselves_are_accepted() -> None:
    params(read_size=1, fraction=1.0, clients=256, depth=1024, vector_size=1024).validate()
    params(read_size=64 * 1024 * 1024, clients=1, timeout_s=float(MAX_TIMEOUT_S)).validate()
    params(urls=("ftp://host:2811/f",), method=Method.COPY).validate()


def test_file_url_inside_allowed_root_is_accepted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "data" / "f"
    target.parent.mkdir()
    target.write_bytes(b"x" * 10)
    params(urls=(target.as_uri(),), file_roots=(str(tmp_path / "data"),)).validate()


def test_symlink_out_of_allowed_root_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "escape").symlink_to("/etc/passwd")
    escaping = params(
        urls=((tmp_path / "data" / "escape").as_uri(),), file_roots=(str(tmp_path / "data"),)
    )
    with pytest.raises(InvalidParams, match="outside the allowed file roots"):
        escaping.validate()


def test_file_smaller_than_one_read_is_refused() -> None:
    with pytest.raises(InvalidParams) as caught:
        params(read_size=4096).check_file_size(URL, 100)
    assert caught.value.field == "read_size"


def test_derived_deadline_grows_with_planned_bytes_and_is_capped() -> None:
    small = params(fraction=0.1).deadline_s(10**6)
    large = params(fraction=1.0, files=4).deadline_s(10**9)
    assert small < large <= MAX_TIMEOUT_S
    assert params(fraction=1.0, files=1000).deadline_s(10**10) == MAX_TIMEOUT_S
    assert params(timeout_s=7.0).deadline_s(10**9) == 7.0


def test_copy_deadline_covers_the_whole_file_even_for_a_small_fraction() -> None:
    direct = params(fraction=0.01, read_size=MiB).deadline_s(10**9)
    copy = params(fraction=0.01, read_size=MiB, method=Method.COPY).deadline_s(10**9)
    assert copy > direct
    assert copy >= DEADLINE_MARGIN_S + 10**9 / MIN_RATE_BPS


def test_synchronous_small_reads_get_their_round_trips_not_just_their_bytes() -> None:
    # The case: 4 KiB random reads of 1% of 2 GiB at 26 ms take ~136 s; bytes
    # alone at 1 MB/s gave 81 s.
    sync = params(pattern=Pattern.RANDOM, read_size=4096, fraction=0.01)
    reads = sync.reads(2 * GiB)
    assert reads == 5243
    deadline = sync.deadline_s(2 * GiB, rtt_s=WAN_RTT_S)
    assert deadline > reads * WAN_RTT_S + DEADLINE_MARGIN_S
    assert deadline >= DEADLINE_MARGIN_S + reads * RTT_FACTOR * WAN_RTT_S
    assert sync.deadline_s(2 * GiB, rtt_s=0.3) > sync.deadline_s(2 * GiB, rtt_s=WAN_RTT_S)


def test_a_near_endpoint_still_gets_a_minimum_per_round_trip() -> None:
    sync = params(pattern=Pattern.RANDOM, read_size=4096, fraction=0.01)
    assert sync.deadline_s(2 * GiB, rtt_s=0.0) == sync.deadline_s(2 * GiB, rtt_s=1e-5)
    assert sync.deadline_s(2 * GiB) >= DEADLINE_MARGIN_S + 5243 * MIN_ROUND_TRIP_S


@pytest.mark.parametrize(
    "changes", [{"pattern": Pattern.ASYNC, "depth": 64}, {"pattern": Pattern.VECTOR}]
)
def test_async_and_vector_plans_wait_for_fewer_round_trips_than_sync_reads(
    changes: dict[str, object],
) -> None:
    same_bytes = {"read_size": 4096, "fraction": 0.01}
    sync = params(pattern=Pattern.RANDOM, **same_bytes)
    batched = params(**same_bytes, **changes)
    limits = (1024, 512 * 1024)
    assert batched.round_trips(2 * GiB, limits) * 50 < sync.round_trips(2 * GiB)
    fewer = batched.deadline_s(2 * GiB, rtt_s=WAN_RTT_S, vector_limits=limits)
    assert fewer < sync.deadline_s(2 * GiB, rtt_s=WAN_RTT_S)
    assert fewer >= DEADLINE_MARGIN_S + batched.planned_bytes(2 * GiB) / MIN_RATE_BPS


def test_a_server_that_allows_fewer_chunks_per_readv_means_more_round_trips() -> None:
    vector = params(pattern=Pattern.VECTOR, read_size=4096, fraction=0.01, vector_size=256)
    wide = vector.round_trips(2 * GiB, (1024, 512 * 1024))
    narrow = vector.round_trips(2 * GiB, (16, 512 * 1024))
    split = vector.round_trips(2 * GiB, (1024, 1024))  # each 4 KiB read is 4 chunks
    assert wide < narrow and wide < split


def test_read_ahead_counts_windows_as_round_trips_and_as_bytes_moved() -> None:
    sequential = params(pattern=Pattern.SEQUENTIAL, read_size=4096, fraction=1.0)
    buffered = params(pattern=Pattern.SEQUENTIAL, read_size=4096, fraction=1.0, readahead=MiB)
    assert buffered.round_trips(GiB) < sequential.round_trips(GiB) / 100
    assert buffered.deadline_s(GiB, rtt_s=WAN_RTT_S) < sequential.deadline_s(GiB, rtt_s=WAN_RTT_S)
    # Random reads through a window mostly miss: each miss moves a whole window.
    random = params(pattern=Pattern.RANDOM, read_size=4096, fraction=0.001, readahead=MiB)
    assert random.wire_bytes(GiB) == random.reads(GiB) * MiB
    assert random.deadline_s(GiB) >= DEADLINE_MARGIN_S + random.reads(GiB) * MiB / MIN_RATE_BPS


def test_an_explicit_timeout_is_the_deadline_whatever_the_round_trips() -> None:
    slow = params(pattern=Pattern.RANDOM, read_size=1, fraction=1.0, timeout_s=7.0)
    assert slow.deadline_s(10**9, rtt_s=0.3) == 7.0
    assert params(read_size=1, fraction=1.0).deadline_s(10**9, rtt_s=0.3) == MAX_TIMEOUT_S


@pytest.mark.parametrize("pattern", list(Pattern))
@pytest.mark.parametrize(("read_size", "fraction"), [(4096, 0.01), (1000, 0.3), (65536, 1.0)])
def test_counted_reads_are_those_the_client_plans(
    pattern: Pattern, read_size: int, fraction: float
) -> None:
    size = 4 * MiB + 123
    run = params(pattern=pattern, read_size=read_size, fraction=fraction, skip=2)
    plan = plan_requests(pattern, file_size=size, read_size=read_size, fraction=fraction, skip=2)
    assert run.reads(size) == len(plan)


@pytest.mark.parametrize("limits", [(1024, 512 * 1024), (100, 2048), (7, 1000)])
@pytest.mark.parametrize(("read_size", "fraction"), [(4096, 0.01), (1000, 0.3), (65536, 1.0)])
def test_counted_readvs_are_at_least_those_the_client_sends(
    limits: tuple[int, int], read_size: int, fraction: float
) -> None:
    size = 4 * MiB + 123
    run = params(pattern=Pattern.VECTOR, read_size=read_size, fraction=fraction)
    plan = plan_requests(Pattern.VECTOR, file_size=size, read_size=read_size, fraction=fraction)
    sent = len(vector_batches(plan, run.vector_size, *limits))
    # The count takes every request as read_size bytes: the plan's short ones (end of file,
    # end of the fraction) make it a little more than sent, never less.
    assert sent <= run.round_trips(size, limits) - FILE_ROUND_TRIPS <= 1.02 * sent + 1


@pytest.mark.parametrize("pattern", [Pattern.SEQUENTIAL, Pattern.SKIP])
@pytest.mark.parametrize("readahead", [4096, 10_000, 65536, MiB])
def test_counted_read_ahead_fetches_are_those_the_window_makes(
    pattern: Pattern, readahead: int
) -> None:
    size = 4 * MiB
    run = params(pattern=pattern, read_size=4096, fraction=0.5, skip=2, readahead=readahead)
    counting = _CountingFile(size)
    window = ReadAheadFile(counting, readahead)
    for offset, n in plan_requests(pattern, file_size=size, read_size=4096, fraction=0.5, skip=2):
        window.read(offset, n)
    assert run.round_trips(size) - FILE_ROUND_TRIPS == counting.reads


class _CountingFile(RemoteFile):
    """Zeros of a given size; counts the reads that reach it."""

    def __init__(self, size: int) -> None:
        self.size, self.served_by, self.bytes_wire, self.reads = size, "", 0, 0

    def read(self, offset: int, size: int) -> bytes:
        self.reads += 1
        return bytes(max(0, min(size, self.size - offset)))

    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        raise NotImplementedError

    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        raise NotImplementedError

    def vector_limits(self) -> VectorLimits:
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_a_run_travels_as_json_and_comes_back_the_same_without_host_settings() -> None:
    """A remote vantage point's claim answer (RunParams.to_json) read back: the same run; what
    a host decides itself (egress policy, file roots, CA folder) is never taken from it."""
    params = RunParams(
        urls=("roots://se.example.org:1094//store/f",),
        method=Method.COPY,
        pattern=Pattern.RANDOM,
        read_size=65536,
        timeout_s=30.0,
        adler32=(("roots://se.example.org:1094//store/f", "0000abcd"),),
        credential_hosts=(".example.org",),
        credential_s=0.25,
    )
    data = params.to_json()
    assert RunParams.from_json(data) == params
    with pytest.raises(InvalidParams) as smuggled:
        RunParams.from_json({**data, "egress": None})
    assert smuggled.value.field == "egress"
    assert RunParams.from_json({**data, "ca_dir": "/etc/evil"}).ca_dir is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"urls": "root://h//f"}, "urls"),
        ({"method": "teleport"}, "method"),
        ({"pattern": 3}, "pattern"),
        ({"fraction": "all"}, "fraction"),
        ({"timeout_s": "soon"}, "timeout"),
        ({"adler32": ["x"]}, "adler32"),
        ({"credential_hosts": [".ac.uk"]}, "credential_hosts"),
        ({"clients": 10_000}, "clients"),
    ],
)
def test_a_run_json_of_the_wrong_shape_is_refused_naming_the_field(
    change: dict[str, object], field: str
) -> None:
    data = {**RunParams(urls=("root://h:1094//f",)).to_json(), **change}
    with pytest.raises(InvalidParams) as refused:
        RunParams.from_json(data)
    assert refused.value.field == field
