"""Sizes as people type them: one parser, one short formatter that it reads back."""

from __future__ import annotations

import pytest

from workers.engine.units import format_size, parse_size, size_text
from workers.lab.files import lab_file_path, size_label

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (0, "0"),
        (1, "1"),
        (1000, "1000"),
        (1536, "1536"),
        (4 * KiB, "4k"),
        (1023 * KiB, "1023k"),
        (MiB, "1M"),
        (MiB + KiB, "1025k"),
        (16 * MiB, "16M"),
        (GiB, "1G"),
        (3 * GiB, "3G"),
        (1024 * GiB, "1024G"),
    ],
)
def test_size_text_is_the_shortest_exact_text(n_bytes: int, text: str) -> None:
    assert size_text(n_bytes) == text


@pytest.mark.parametrize("n_bytes", [1, 1000, 4 * KiB, 1536 * KiB, 256 * MiB, 2 * GiB])
def test_parse_size_reads_size_text_back(n_bytes: int) -> None:
    assert parse_size(size_text(n_bytes)) == n_bytes


def test_lab_files_are_named_by_size_text() -> None:
    assert [lab_file_path(size) for size in (KiB, 16 * MiB, GiB, 1000)] == [
        "/fedprobe/file-1k",
        "/fedprobe/file-16M",
        "/fedprobe/file-1G",
        "/fedprobe/file-1000",
    ]


@pytest.mark.parametrize("n_bytes", [1, 1000, 1536, 4 * KiB, 1025 * KiB, 16 * MiB, 3 * GiB])
def test_the_lab_names_its_files_as_size_text_does(n_bytes: int) -> None:
    # The lab imports nothing of the engine (tests/workers/lab), so it keeps its own copy.
    assert size_label(n_bytes) == size_text(n_bytes)


def test_format_size_is_for_reading_not_typing() -> None:
    assert [format_size(n) for n in (4 * KiB, 1536, 16 * MiB)] == ["4 KiB", "1.5 KiB", "16 MiB"]
