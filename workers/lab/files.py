"""The lab's test files: seeded random bytes, generated once per lab dir, adler32 in a manifest.

A file's bytes depend only on its path and size (`random.Random("fedprobe-lab:PATH:SIZE")`,
drawn in 4 MiB chunks), so every lab generates the same files. The manifest records size,
adler32 and mtime of what was written; a file whose size and mtime still match is reused.
"""

from __future__ import annotations

import json
import os
import random
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

DEFAULT_FILE_SIZES = (1 * MiB, 16 * MiB, 256 * MiB)
TEST_FILE_DIR = "/fedprobe"

_CHUNK = 4 * MiB
_SHOW_PROGRESS_FROM = 64 * MiB
_LABELS = (("G", GiB), ("M", MiB), ("k", KiB))
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_MULTIPLIER = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1024 * GiB}


class TextSink(Protocol):
    def write(self, text: str, /) -> object: ...


@dataclass(frozen=True)
class LabFile:
    """A test file as clients see it: its path on every endpoint that serves it."""

    path: str
    size: int
    adler32: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "size": self.size, "adler32": self.adler32}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LabFile:
        return cls(
            path=str(data["path"]), size=int(str(data["size"])), adler32=str(data["adler32"])
        )


def parse_size(text: str) -> int:
    """Bytes from "4096", "4k", "16M", "1G" or "16MiB" (binary units), at least 1."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"invalid size {text!r}: give bytes or a number with k, M, G (16M)")
    size = int(match[1]) * _MULTIPLIER[match[2].lower()]
    if size < 1:
        raise ValueError(f"invalid size {text!r}: a test file needs at least 1 byte")
    return size


def size_label(size: int) -> str:
    """The shortest exact name of a size: 4k, 16M, 1G, or bytes."""
    for suffix, unit in _LABELS:
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def lab_file_path(size: int) -> str:
    return f"{TEST_FILE_DIR}/file-{size_label(size)}"


def file_seed(path: str, size: int) -> str:
    return f"fedprobe-lab:{path}:{size}"


def ensure_files(
    root: Path, wanted: Iterable[tuple[str, int]], manifest: Path, progress: TextSink | None
) -> list[LabFile]:
    """Make every (path, size) exist under `root`, generating only what is missing or changed."""
    entries = _read_manifest(manifest)
    files = []
    for path, size in wanted:
        target = root / path.lstrip("/")
        entry = entries.get(path)
        if entry is None or not _still_matches(target, entry, size):
            entry = _generate(target, path, size, progress)
            entries[path] = entry
        files.append(LabFile(path, size, str(entry["adler32"])))
    _write_manifest(manifest, entries)
    return files


def _still_matches(target: Path, entry: dict[str, object], size: int) -> bool:
    try:
        found = target.stat()
    except FileNotFoundError:
        return False
    return entry.get("size") == size == found.st_size and entry.get("mtime_ns") == found.st_mtime_ns


def _generate(target: Path, path: str, size: int, progress: TextSink | None) -> dict[str, object]:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    rng = random.Random(file_seed(path, size))
    checksum = zlib.adler32(b"")
    shown = _Progress(path, size, progress if size >= _SHOW_PROGRESS_FROM else None)
    with partial.open("wb") as out:
        written = 0
        while written < size:
            chunk = rng.randbytes(min(_CHUNK, size - written))
            out.write(chunk)
            checksum = zlib.adler32(chunk, checksum)
            written += len(chunk)
            shown.update(written)
    partial.chmod(0o644)
    partial.replace(target)
    return {
        "size": size,
        "adler32": f"{checksum:08x}",
        "mtime_ns": target.stat().st_mtime_ns,
        "seed": file_seed(path, size),
    }


class _Progress:
    """ "generating /fedprobe/file-1G: 40%" lines, one per 10%."""

    def __init__(self, path: str, size: int, sink: TextSink | None) -> None:
        self.path, self.size, self.sink = path, size, sink
        self.shown = -1

    def update(self, written: int) -> None:
        if self.sink is None:
            return
        tenth = written * 10 // self.size
        if tenth != self.shown:
            self.shown = tenth
            self.sink.write(f"generating {self.path} ({size_label(self.size)}): {tenth * 10}%\n")


def _read_manifest(manifest: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(manifest.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(path): entry for path, entry in files.items() if isinstance(entry, dict)}


def _write_manifest(manifest: Path, entries: dict[str, dict[str, object]]) -> None:
    partial = manifest.with_name(manifest.name + ".partial")
    partial.write_text(json.dumps({"files": entries}, indent=2, sort_keys=True) + "\n")
    os.chmod(partial, 0o644)
    partial.replace(manifest)
