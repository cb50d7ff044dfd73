"""file:// through os.pread: the local-disk reference, and the read side of copy/stage."""

from __future__ import annotations

import os
import shutil
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path

from workers.engine.backends.base import (
    AsyncRecorder,
    Backend,
    CopyResult,
    FileFacts,
    MetadataCall,
    OpenOptions,
    RemoteFile,
    VectorLimits,
    WritableFile,
)
from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.urls import local_path

LOCAL_SERVER = "localhost"
_CHECKSUM_CHUNK = 4 * 1024 * 1024
# No server limits apply locally; keep vectored reads the size XRootD would accept.
LOCAL_VECTOR_LIMITS = VectorLimits(max_chunks=1024, max_chunk_bytes=2**31)


def os_error(exc: OSError, what: str) -> ProbeError:
    if isinstance(exc, FileNotFoundError):
        return ProbeError(ErrorClass.NOT_FOUND, f"{what}: {exc.strerror}")
    if isinstance(exc, PermissionError):
        return ProbeError(ErrorClass.AUTH, f"{what}: {exc.strerror}")
    return ProbeError(ErrorClass.SERVER_ERROR, f"{what}: {exc.strerror or exc}")


class LocalFile(RemoteFile):
    """A local file read with pread: no buffering of ours, the page cache is the OS's."""

    def __init__(self, path: str) -> None:
        self._path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
            self.size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise os_error(exc, f"open {path}") from exc
        self.served_by = LOCAL_SERVER
        self.bytes_wire = 0

    def read(self, offset: int, size: int) -> bytes:
        try:
            data = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise os_error(exc, f"read {size} B at {offset}") from exc
        self.bytes_wire += len(data)
        return data

    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        pread, fd = os.pread, self._fd
        try:
            size = sum(len(pread(fd, length, offset)) for offset, length in chunks)
        except OSError as exc:
            raise os_error(exc, f"readv of {len(chunks)} chunks") from exc
        self.bytes_wire += size
        return size

    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        perf_ns = time.perf_counter_ns

        def timed_read(offset: int, size: int) -> tuple[int, int]:
            started = perf_ns()
            n_bytes = len(os.pread(self._fd, size, offset))
            return perf_ns() - started, n_bytes

        with ThreadPoolExecutor(max_workers=depth) as pool:
            in_flight: set[Future[tuple[int, int]]] = set()
            pending = iter(requests)
            for offset, size in pending:
                in_flight.add(pool.submit(timed_read, offset, size))
                if len(in_flight) == depth:
                    break
            while in_flight:
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    try:
                        latency_ns, n_bytes = future.result()
                    except OSError as exc:
                        raise os_error(exc, "async read") from exc
                    self.bytes_wire += n_bytes
                    record(latency_ns, n_bytes)
                    for offset, size in pending:
                        in_flight.add(pool.submit(timed_read, offset, size))
                        break

    def vector_limits(self) -> VectorLimits:
        return LOCAL_VECTOR_LIMITS

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError as exc:
            raise os_error(exc, f"close {self._path}") from exc


class LocalWritableFile(WritableFile):
    """A local file created with O_EXCL (never overwriting) and written with pwrite; the
    close is the commit (fsync: what a storage system's close promises)."""

    def __init__(self, path: str) -> None:
        self._path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise os_error(exc, f"create {path}") from exc
        self.served_by = LOCAL_SERVER

    def write(self, offset: int, data: bytes, timeout_s: int) -> None:
        """A local write has no timeout: `timeout_s` is not used."""
        try:
            written = os.pwrite(self._fd, data, offset)
        except OSError as exc:
            raise os_error(exc, f"write {len(data)} B at {offset}") from exc
        if written != len(data):
            raise ProbeError(ErrorClass.SERVER_ERROR, f"wrote {written} of {len(data)} B")

    def close(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise os_error(exc, f"close {self._path}") from exc
        finally:
            os.close(self._fd)


class LocalBackend(Backend):
    """file:// URLs."""

    def open(self, url: str, options: OpenOptions) -> RemoteFile:
        return LocalFile(local_path(url))

    def stat_size(self, url: str, options: OpenOptions) -> int:
        try:
            return os.stat(local_path(url)).st_size
        except OSError as exc:
            raise os_error(exc, f"stat {url}") from exc

    def file_facts(self, url: str, options: OpenOptions) -> FileFacts:
        """No server to ask: the size from stat, the adler32 computed from the bytes (within
        the deadline; a file too large to read by then gets none)."""
        size = self.stat_size(url, options)
        try:
            adler32 = _adler32_of(local_path(url), options.deadline)
        except OSError as exc:
            why = f"not computed: {os_error(exc, 'read').message}"
            return FileFacts(size, "os.stat", None, why)
        if adler32 is None:
            why = f"not computed: {size} bytes could not be read before the deadline"
            return FileFacts(size, "os.stat", None, why)
        return FileFacts(size, "os.stat", adler32, "reading the file (zlib.adler32)")

    def copy_to_local(self, url: str, dest: Path, options: OpenOptions) -> CopyResult:
        try:
            shutil.copyfile(local_path(url), dest)
        except OSError as exc:
            raise os_error(exc, f"copy {url}") from exc
        return CopyResult(dest.stat().st_size, LOCAL_SERVER)

    def create(self, url: str, size: int, options: OpenOptions) -> WritableFile:
        return LocalWritableFile(local_path(url))

    def checksum(self, url: str, options: OpenOptions) -> str:
        """No server to ask: computed from the bytes the file system stored."""
        try:
            adler32 = _adler32_of(local_path(url), options.deadline)
        except OSError as exc:
            raise os_error(exc, f"checksum of {url}") from exc
        if adler32 is None:
            raise ProbeError(ErrorClass.TIMEOUT, f"checksum of {url}: not done by the deadline")
        return adler32

    def delete(self, url: str, options: OpenOptions) -> None:
        try:
            os.unlink(local_path(url))
        except OSError as exc:
            raise os_error(exc, f"delete {url}") from exc

    def list_names(self, url: str, options: OpenOptions) -> list[str]:
        try:
            return os.listdir(local_path(url))
        except OSError as exc:
            raise os_error(exc, f"list {url}") from exc

    def metadata_call(self, operation: str, url: str, options: OpenOptions) -> MetadataCall:
        path = local_path(url)
        calls = {"stat": _stat, "open": _open_close, "list": _list}
        if operation not in calls:
            raise self.unsupported(operation)
        return partial(calls[operation], path)


# The metadata calls: (path, the whole seconds left), of which a local call uses no timeout.


def _stat(path: str, timeout_s: int) -> None:
    try:
        os.stat(path)
    except OSError as exc:
        raise os_error(exc, f"stat {path}") from exc


def _open_close(path: str, timeout_s: int) -> None:
    try:
        os.close(os.open(path, os.O_RDONLY))
    except OSError as exc:
        raise os_error(exc, f"open {path}") from exc


def _list(path: str, timeout_s: int) -> None:
    try:
        with os.scandir(path) as entries:
            for _ in entries:
                pass
    except OSError as exc:
        raise os_error(exc, f"list {path}") from exc


def _adler32_of(path: str, deadline: Deadline) -> str | None:
    """The file's adler32 in 8 hex digits; None when the deadline passes first."""
    adler = zlib.adler32(b"")
    with open(path, "rb") as file:
        while chunk := file.read(_CHECKSUM_CHUNK):
            adler = zlib.adler32(chunk, adler)
            if deadline.remaining() <= 0:
                return None
    return f"{adler:08x}"
