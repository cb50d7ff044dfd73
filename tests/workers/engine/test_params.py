"""Bounds of a run's parameters: bad input names its field and starts nothing."""

import pytest

from workers.engine.errors import InvalidParams
from workers.engine.params import MAX_TIMEOUT_S, Method, Pattern, RunParams

URL = "root://127.0.0.1:1094//data/file"


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
    direct = params(fraction=0.01).deadline_s(10**9)
    copy = params(fraction=0.01, method=Method.COPY).deadline_s(10**9)
    assert copy > direct
