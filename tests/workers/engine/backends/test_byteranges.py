"""The multipart/byteranges parser on hand-made answers (the shapes servers really send)."""

from __future__ import annotations

import pytest

from workers.engine.backends.byteranges import (
    MalformedRanges,
    MissingRanges,
    Part,
    chunk_views,
    parse_byteranges,
    parse_content_range,
    range_header,
)

FILE = bytes(range(256)) * 64  # 16 KiB whose every byte says where it is (mod 256)
XRDHTTP_TYPE = "multipart/byteranges; boundary=123456"


def multipart(ranges: list[tuple[int, int]], boundary: bytes = b"123456") -> bytes:
    """A body as XrdHttp writes it: CRLF preamble, per-part Content-type and Content-range."""
    body = b"\r\n"
    for first, last in ranges:
        body += b"--" + boundary + b"\r\nContent-type: text/plain; charset=UTF-8\r\n"
        body += f"Content-range: bytes {first}-{last}/{len(FILE)}\r\n\r\n".encode()
        body += FILE[first : last + 1] + b"\r\n"
    return body + b"--" + boundary + b"--\r\n"


def as_bytes(views: list[memoryview]) -> list[bytes]:
    return [bytes(view) for view in views]


def test_parts_come_back_in_server_order() -> None:
    parts = parse_byteranges(multipart([(100, 103), (0, 1)]), XRDHTTP_TYPE)
    assert [(part.start, bytes(part.data)) for part in parts] == [
        (100, FILE[100:104]),
        (0, FILE[0:2]),
    ]


def test_data_containing_the_boundary_does_not_split_a_part() -> None:
    data = b"xx\r\n--123456\r\nContent-range: bytes 0-1/2\r\n\r\nzz"
    body = b"--123456\r\nContent-Range: bytes 0-%d/99\r\n\r\n%s\r\n--123456--" % (
        len(data) - 1,
        data,
    )
    (part,) = parse_byteranges(body, XRDHTTP_TYPE)
    assert bytes(part.data) == data


def test_quoted_boundary_and_no_preamble() -> None:
    body = multipart([(5, 9)], boundary=b"a b")[2:]
    (part,) = parse_byteranges(body, 'multipart/byteranges; boundary="a b"')
    assert bytes(part.data) == FILE[5:10]


def test_coalesced_part_serves_adjacent_and_overlapping_chunks() -> None:
    chunks = [(100, 4), (104, 4), (106, 4), (0, 2)]
    parts = parse_byteranges(multipart([(0, 1), (100, 109)]), XRDHTTP_TYPE)
    assert as_bytes(chunk_views(parts, chunks)) == [FILE[o : o + s] for o, s in chunks]


def test_single_part_answer_serves_every_chunk_inside_it() -> None:
    whole = Part(1000, memoryview(FILE[1000:3000]))
    chunks = [(1000, 10), (2990, 10), (1500, 1)]
    assert as_bytes(chunk_views([whole], chunks)) == [FILE[o : o + s] for o, s in chunks]


def test_chunk_split_over_two_parts_is_stitched() -> None:
    parts = parse_byteranges(multipart([(20, 29), (10, 19)]), XRDHTTP_TYPE)
    assert as_bytes(chunk_views(parts, [(12, 15)])) == [FILE[12:27]]


def test_empty_chunk_needs_no_part() -> None:
    assert as_bytes(chunk_views([], [(5, 0)])) == [b""]


@pytest.mark.parametrize(
    ("parts", "chunk"),
    [
        ([(0, 9)], (20, 5)),  # not sent at all
        ([(0, 9)], (5, 10)),  # sent only in part
        ([(0, 9), (11, 20)], (5, 10)),  # a hole in the middle
        ([(10, 19)], (0, 5)),  # before every part
    ],
)
def test_missing_requested_bytes_are_an_error(
    parts: list[tuple[int, int]], chunk: tuple[int, int]
) -> None:
    parsed = parse_byteranges(multipart(parts), XRDHTTP_TYPE)
    with pytest.raises(MissingRanges):
        chunk_views(parsed, [chunk])


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (multipart([(0, 9)]), "multipart/byteranges"),  # no boundary parameter
        (multipart([(0, 9)], boundary=b"other"), XRDHTTP_TYPE),  # body has another boundary
        (multipart([(0, 9)])[:-20], XRDHTTP_TYPE),  # cut inside the part's data
        (multipart([(0, 9)]).replace(b"0-9/", b"0-8/"), XRDHTTP_TYPE),  # length disagrees
        (multipart([(0, 9)]).replace(b"Content-range", b"X-range"), XRDHTTP_TYPE),
        (multipart([(0, 9)]).replace(b"0-9/", b"9-0/"), XRDHTTP_TYPE),
        (multipart([(0, 9)]).replace(b"--123456\r\nC", b"--123456junk\r\nC"), XRDHTTP_TYPE),
    ],
)
def test_malformed_answers_are_rejected(body: bytes, content_type: str) -> None:
    with pytest.raises(MalformedRanges):
        parse_byteranges(body, content_type)


def test_range_header_and_content_range() -> None:
    assert range_header([(0, 1), (100, 50)]) == "bytes=0-0,100-149"
    assert parse_content_range("bytes 100-149/4194304") == (100, 149, 4194304)
    assert parse_content_range("bytes 0-0/*") == (0, 0, -1)
