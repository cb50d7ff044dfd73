"""The HTTP backend against the lab's real XrdHttp, and against servers that misbehave."""

from __future__ import annotations

import random
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.http import MAX_RANGES, HttpBackend, HttpFile
from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.httpclient import http_url

# The conftest's script_server fixture: answers -> port.
ScriptServer = Callable[[Sequence[bytes]], int]

pytestmark = pytest.mark.lab

FILE = "/fedprobe/file-4M"


def options(deadline_s: float = 30) -> OpenOptions:
    return OpenOptions(user="c0", streams=1, deadline=Deadline.after(deadline_s))


def adler32(value: int | str) -> int:
    """The lab may write a checksum as an int or as 8 hex digits."""
    return int(value, 16) if isinstance(value, str) else value


@pytest.fixture(scope="module")
def endpoint(lab: Any) -> Any:
    return lab.endpoint("local-http")


@pytest.fixture(scope="module")
def url(endpoint: Any) -> str:
    return str(endpoint.file_url(FILE))


@pytest.fixture(scope="module")
def content(lab: Any) -> bytes:
    return (Path(lab.data_dir("local")) / FILE.lstrip("/")).read_bytes()


@pytest.fixture
def remote(url: str) -> Any:
    opened = HttpBackend().open(url, options())
    yield opened
    opened.close()


def test_open_gives_size_and_the_server_that_answered(remote: HttpFile, url: str) -> None:
    assert remote.size == 4 * 1024 * 1024
    assert url.startswith(f"http://{remote.served_by}/")


def test_reads_return_the_file_bytes(remote: HttpFile, content: bytes) -> None:
    for offset, size in [(0, 4096), (12345, 1), (1_000_000, 1 << 20), (4096 * 999, 65536)]:
        assert remote.read(offset, size) == content[offset : offset + size]


def test_bytes_wire_counts_the_bodies_of_reads(remote: HttpFile) -> None:
    assert remote.bytes_wire == 0
    remote.read(0, 4096)
    assert remote.bytes_wire == 4096


def test_read_reaching_past_end_of_file_returns_the_rest(remote: HttpFile, content: bytes) -> None:
    assert remote.read(remote.size - 100, 4096) == content[-100:]
    assert remote.read(remote.size, 4096) == b""


def test_readv_of_1024_chunks_returns_every_chunk(remote: HttpFile, content: bytes) -> None:
    rng = random.Random(1)
    offsets = rng.sample(range(0, remote.size - 5000), MAX_RANGES)
    chunks = [(offset, rng.randrange(1, 5000)) for offset in offsets]
    views = remote.readv_views(chunks)
    assert [bytes(view) for view in views] == [content[o : o + s] for o, s in chunks]
    before = remote.bytes_wire
    delivered = remote.readv(chunks)
    assert delivered == sum(size for _, size in chunks)
    assert remote.bytes_wire - before > delivered  # multipart headers crossed the wire too


def test_readv_of_one_chunk_and_one_past_end_of_file(remote: HttpFile, content: bytes) -> None:
    views = remote.readv_views([(100, 50), (remote.size - 10, 100), (remote.size + 1, 10)])
    assert [bytes(view) for view in views] == [content[100:150], content[-10:], b""]


def test_async_reads_deliver_every_request_exactly_once(remote: HttpFile) -> None:
    # Distinct sizes let the recorded byte counts identify the requests.
    rng = random.Random(2)
    requests = [(rng.randrange(0, remote.size - 5000), 1000 + index) for index in range(2000)]
    recorded: list[tuple[int, int]] = []
    remote.read_async(
        requests, 16, lambda latency_ns, nbytes: recorded.append((latency_ns, nbytes))
    )
    assert Counter(nbytes for _, nbytes in recorded) == Counter(size for _, size in requests)
    assert all(latency_ns > 0 for latency_ns, _ in recorded)


def test_copy_to_local_has_the_lab_checksum(url: str, endpoint: Any, tmp_path: Path) -> None:
    (lab_file,) = [f for f in endpoint.files if f.path == FILE]
    copied = HttpBackend().copy_to_local(url, tmp_path / "copy", options())
    assert copied.bytes_copied == lab_file.size
    assert zlib.adler32((tmp_path / "copy").read_bytes()) == adler32(lab_file.adler32)
    assert url.startswith(f"http://{copied.served_by}/")


def test_stat_size_is_the_file_size(url: str) -> None:
    assert HttpBackend().stat_size(url, options()) == 4 * 1024 * 1024


def test_missing_file_is_not_found(endpoint: Any, tmp_path: Path) -> None:
    missing = endpoint.file_url("/fedprobe/no-such-file")
    for attempt in (
        lambda: HttpBackend().open(missing, options()),
        lambda: HttpBackend().stat_size(missing, options()),
        lambda: HttpBackend().copy_to_local(missing, tmp_path / "copy", options()),
    ):
        with pytest.raises(ProbeError) as failure:
            attempt()
        assert failure.value.error_class is ErrorClass.NOT_FOUND
        assert "/fedprobe/no-such-file" in failure.value.message
        assert "404" in failure.value.message
    assert not (tmp_path / "copy").exists()


def test_refused_port_is_refused(refused_port: int) -> None:
    with pytest.raises(ProbeError) as failure:
        HttpBackend().open(f"http://127.0.0.1:{refused_port}{FILE}", options())
    assert failure.value.error_class is ErrorClass.REFUSED
    assert f"127.0.0.1:{refused_port}" in failure.value.message


def test_server_that_never_answers_times_out_by_the_deadline(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(ProbeError) as failure:
        HttpBackend().open(f"http://127.0.0.1:{silent_port}{FILE}", options(deadline_s=1.5))
    assert failure.value.error_class is ErrorClass.TIMEOUT
    assert time.monotonic() - started < 2.5


def _answer(status: str, headers: str = "", body: bytes = b"", length: int | None = None) -> bytes:
    """A raw HTTP answer; `length` other than len(body) promises bytes that never come."""
    length = len(body) if length is None else length
    return f"HTTP/1.1 {status}\r\n{headers}Content-Length: {length}\r\n\r\n".encode() + body


OPENED = _answer("206 Partial Content", "Content-Range: bytes 0-0/1000\r\n", b"x")


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}{FILE}"


@pytest.mark.parametrize(
    ("answer", "error_class"),
    [
        (_answer("401 Unauthorized"), ErrorClass.AUTH),
        (_answer("403 Forbidden", body=b"no way"), ErrorClass.AUTH),
        (_answer("500 Internal Server Error", body=b"oops"), ErrorClass.SERVER_ERROR),
        (_answer("200 OK", body=b"whole file"), ErrorClass.SERVER_ERROR),
        (_answer("206 Partial Content", "Content-Range: junk\r\n", b"x"), ErrorClass.SERVER_ERROR),
        (b"HTTP/1.1 206 Partial", ErrorClass.SERVER_ERROR),
    ],
)
def test_open_maps_server_answers_to_error_classes(
    script_server: ScriptServer, answer: bytes, error_class: ErrorClass
) -> None:
    port = script_server([answer])
    with pytest.raises(ProbeError) as failure:
        HttpBackend().open(_url(port), options(deadline_s=5))
    assert failure.value.error_class is error_class
    assert _url(port) in failure.value.message


def test_read_cut_short_is_a_short_read(script_server: ScriptServer) -> None:
    cut = _answer("206 Partial Content", "Content-Range: bytes 0-99/1000\r\n", b"y" * 10, 100)
    remote = HttpBackend().open(_url(script_server([OPENED, cut])), options(deadline_s=5))
    with pytest.raises(ProbeError) as failure:
        remote.read(0, 100)
    remote.close()
    assert failure.value.error_class is ErrorClass.SHORT_READ
    assert "10 of 100" in failure.value.message


def test_read_answered_with_another_range_is_a_server_error(script_server: ScriptServer) -> None:
    other = _answer("206 Partial Content", "Content-Range: bytes 1-100/1000\r\n", b"y" * 100)
    remote = HttpBackend().open(_url(script_server([OPENED, other])), options(deadline_s=5))
    with pytest.raises(ProbeError) as failure:
        remote.read(0, 100)
    remote.close()
    assert failure.value.error_class is ErrorClass.SERVER_ERROR


def test_readv_answer_lacking_a_range_is_a_short_read(script_server: ScriptServer) -> None:
    one_part = _answer("206 Partial Content", "Content-Range: bytes 0-9/1000\r\n", b"y" * 10)
    remote = HttpBackend().open(_url(script_server([OPENED, one_part])), options(deadline_s=5))
    with pytest.raises(ProbeError) as failure:
        remote.readv([(0, 10), (500, 10)])
    remote.close()
    assert failure.value.error_class is ErrorClass.SHORT_READ
    assert "500-509" in failure.value.message


@pytest.mark.parametrize(
    ("answer", "error_class"),
    [
        (_answer("404 Not Found", body=b"gone"), ErrorClass.NOT_FOUND),
        (_answer("503 Service Unavailable"), ErrorClass.SERVER_ERROR),
        (
            _answer("206 Partial Content", "Content-Range: bytes 0-9/1000\r\n", b"y", 10),
            ErrorClass.SHORT_READ,
        ),
    ],
)
def test_async_read_failures_keep_their_class(
    script_server: ScriptServer, answer: bytes, error_class: ErrorClass
) -> None:
    remote = HttpBackend().open(_url(script_server([OPENED, answer])), options(deadline_s=5))
    with pytest.raises(ProbeError) as failure:
        remote.read_async([(0, 10)] * 20, 4, lambda latency_ns, nbytes: None)
    remote.close()
    assert failure.value.error_class is error_class


def test_copy_cut_short_is_a_short_read_and_leaves_no_file(
    script_server: ScriptServer, tmp_path: Path
) -> None:
    port = script_server([_answer("200 OK", body=b"y" * 10, length=1000)])
    with pytest.raises(ProbeError) as failure:
        HttpBackend().copy_to_local(_url(port), tmp_path / "copy", options(deadline_s=5))
    assert failure.value.error_class is ErrorClass.SHORT_READ
    assert "10 of 1000" in failure.value.message
    assert not (tmp_path / "copy").exists()


def test_reads_go_to_the_server_the_redirector_chose(
    script_server: ScriptServer, url: str, content: bytes
) -> None:
    # The redirector redirects every request: reads that went back to it would never end.
    redirector = script_server([_answer("302 Found", f"Location: {url}\r\n")])
    remote = HttpBackend().open(_url(redirector), options())
    assert url.startswith(f"http://{remote.served_by}/")
    assert remote.read(10, 100) == content[10:110]
    assert remote.readv([(0, 5), (100, 5)]) == 10
    remote.read_async([(0, 5)] * 4, 2, lambda latency_ns, nbytes: None)
    remote.close()


def test_davs_is_https() -> None:
    assert http_url("davs://host:1094/f") == "https://host:1094/f"
    with pytest.raises(ValueError, match="not an HTTP"):
        http_url("root://host//f")
