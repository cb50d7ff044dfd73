"""The GridFTP backend: globus-url-copy against the lab's real anonymous GridFTP server."""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.gridftp import GridFtpBackend
from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError

pytestmark = pytest.mark.lab

FILE = "/fedprobe/file-4M"


def options(streams: int = 1, deadline_s: float = 30) -> OpenOptions:
    return OpenOptions(user="c0", streams=streams, deadline=Deadline.after(deadline_s))


def adler32(value: int | str) -> int:
    """The lab may write a checksum as an int or as 8 hex digits."""
    return int(value, 16) if isinstance(value, str) else value


@pytest.fixture(scope="module")
def endpoint(lab: Any) -> Any:
    return lab.endpoint("local-ftp")


@pytest.mark.parametrize("streams", [1, 4])
def test_copy_has_the_lab_checksum(endpoint: Any, tmp_path: Path, streams: int) -> None:
    (lab_file,) = [f for f in endpoint.files if f.path == FILE]
    url = endpoint.file_url(FILE)
    copied = GridFtpBackend().copy_to_local(url, tmp_path / "copy", options(streams))
    assert copied.bytes_copied == lab_file.size
    assert zlib.adler32((tmp_path / "copy").read_bytes()) == adler32(lab_file.adler32)
    assert url.startswith(f"ftp://{copied.served_by}/")


def test_stat_size_is_the_file_size(endpoint: Any) -> None:
    for lab_file in endpoint.files:
        size = GridFtpBackend().stat_size(endpoint.file_url(lab_file.path), options())
        assert size == lab_file.size


def test_missing_file_is_not_found_and_leaves_no_file(endpoint: Any, tmp_path: Path) -> None:
    missing = endpoint.file_url("/fedprobe/no-such-file")
    with pytest.raises(ProbeError) as failure:
        GridFtpBackend().copy_to_local(missing, tmp_path / "copy", options())
    assert failure.value.error_class is ErrorClass.NOT_FOUND
    assert missing in failure.value.message
    assert not (tmp_path / "copy").exists()
    with pytest.raises(ProbeError) as failure:
        GridFtpBackend().stat_size(missing, options())
    assert failure.value.error_class is ErrorClass.NOT_FOUND


@pytest.mark.parametrize(
    "url", ["-list ftp://127.0.0.1/", "-dbg", "file:///etc/passwd", "http://127.0.0.1/f"]
)
def test_urls_it_could_take_for_options_or_other_protocols_are_refused(
    url: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParams):
        GridFtpBackend().copy_to_local(url, tmp_path / "copy", options())
    with pytest.raises(InvalidParams):
        GridFtpBackend().stat_size(url, options())
    assert not (tmp_path / "copy").exists()


def test_refused_port_is_refused(refused_port: int, tmp_path: Path) -> None:
    with pytest.raises(ProbeError) as failure:
        GridFtpBackend().copy_to_local(
            f"ftp://127.0.0.1:{refused_port}{FILE}", tmp_path / "copy", options()
        )
    assert failure.value.error_class is ErrorClass.REFUSED


def test_server_that_never_answers_times_out_by_the_deadline(
    silent_port: int, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(ProbeError) as failure:
        GridFtpBackend().copy_to_local(
            f"ftp://127.0.0.1:{silent_port}{FILE}", tmp_path / "copy", options(deadline_s=1.5)
        )
    assert failure.value.error_class is ErrorClass.TIMEOUT
    assert time.monotonic() - started < 2.5


def test_reading_in_place_is_refused(endpoint: Any) -> None:
    with pytest.raises(ProbeError, match="copy protocol") as failure:
        GridFtpBackend().open(endpoint.file_url(FILE), options())
    assert failure.value.error_class is ErrorClass.SERVER_ERROR
