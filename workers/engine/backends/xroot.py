"""root:// through the XRootD Python bindings (direct reads) and xrdcp (copies)."""

from __future__ import annotations

import os
import queue
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from XRootD import client as xrd
from XRootD.client.flags import AccessMode, HostTypes, OpenFlags, QueryCode

from workers.engine.backends import xroot_tls
from workers.engine.backends.base import (
    AsyncRecorder,
    Backend,
    CopyResult,
    FileFacts,
    MetadataCall,
    Negotiated,
    OpenOptions,
    RemoteFile,
    VectorLimits,
    WritableFile,
)
from workers.engine.backends.tools import run_copy_tool, tool_version
from workers.engine.credential_scope import CredentialScope
from workers.engine.credentials import XRD_NETWORK_STACKS, Access, AuthMethod
from workers.engine.deadline import Deadline
from workers.engine.errors import NO_TLS, ErrorClass, ProbeError
from workers.engine.urls import host_of, normalize_server, with_user

# XrdClStatus.hh codes, grouped by the error class they mean for a run.
_TIMEOUT_CODES = {103, 206}  # errSocketTimeout, errOperationExpired
_REFUSED_CODES = {101, 102, 104, 107, 108}  # invalid addr, socket error/disconnect, connection
_AUTH_CODES = {203, 204}  # errLoginFailed, errAuthFailed
_TLS_CODE = 110  # errTlsError: XrdCl says no more (the reason is only in its debug log)
# ... except when the server offers no TLS at all: then XrdCl says this (5.5, 5.6).
_SERVER_WITHOUT_TLS = "not configured to support encryption"
_ERROR_RESPONSE = 400  # the server answered kXR_error: its errno tells why
_KXR_NOT_FOUND = 3011
_KXR_NOT_AUTHORIZED = 3010
_HEX32 = re.compile(r"[0-9a-fA-F]{1,8}")
# The server's readv limits when it does not say (XRootD 5 defaults).
DEFAULT_VECTOR_LIMITS = VectorLimits(max_chunks=1024, max_chunk_bytes=2097136)
_TLS_HINT = (
    "the server's certificate did not verify against X509_CERT_DIR "
    "(an unknown CA, an expired certificate or a host name mismatch)"
)
DEFAULT_PORT = 1094
# Redirectors behind redirectors a preflight follows (global, regional, site: three).
MAX_REDIRECTOR_LEVELS = 4
# XrdCl's StreamTimeout never below this: at 1 s (a 1 s deadline) its once-a-second check,
# on whole-second timestamps, took a busy stream for dead; it reconnected and the server no
# longer knew the open file (3004). On the lab a writer met it within 10 s every time at 1 s,
# never at 5 s (docs/engine.md "Deadlines").
STREAM_TIMEOUT_FLOOR_S = 5


def configure_client(options: OpenOptions) -> None:
    """Set XrdCl's timeouts from the run's deadline (its defaults wait 1800 s) and substreams.

    Called in the client process before its first connection; XrdCl reads these when it
    creates a channel, and checks timeouts every TimeoutResolution seconds (default 15).
    StreamTimeout is at least STREAM_TIMEOUT_FLOOR_S: each request still carries the time
    left, and the driver kills a client 2 s past the deadline.
    """
    seconds = options.deadline.timeout_s()
    xrd.EnvPutInt("TimeoutResolution", 1)
    xrd.EnvPutInt("RequestTimeout", seconds)
    xrd.EnvPutInt("StreamTimeout", max(seconds, STREAM_TIMEOUT_FLOOR_S))
    xrd.EnvPutInt("ConnectionWindow", min(seconds, 60))
    xrd.EnvPutInt("ConnectionRetry", 1)
    xrd.EnvPutInt("SubStreamsPerChannel", options.streams)
    pin_network_stack(options.access)


def pin_network_stack(access: Access) -> None:
    """Hold XrdCl in this process to the run's address family, if it is pinned to one.

    XrdCl read XRD_NETWORKSTACK when it was imported, before the run's environment was set
    (the fork server imports it): the family is put to it here, before any connection
    (xrdcp reads XRD_NETWORKSTACK from the environment Access.apply_environment set).
    """
    stack = XRD_NETWORK_STACKS.get(access.address_family)
    if stack is None or xrd.EnvPutString("NetworkStack", stack):
        return
    if xrd.EnvGetString("NetworkStack") != stack:  # the worker's environment set another
        raise ProbeError(ErrorClass.HARNESS, f"XrdCl refused NetworkStack {stack}")


def status_error(status: Any, what: str, *, reading: bool = False) -> ProbeError:
    """Turn an XRootDStatus that is not ok into a ProbeError with its error class.

    A connection lost while reading an open file is a short read, not a refusal.
    """
    code, errno, message = status.code, status.errno, status.message.strip()
    if code == _TLS_CODE and _SERVER_WITHOUT_TLS in message:
        return no_tls_error(what)
    if code == _TLS_CODE:
        return ProbeError(ErrorClass.TLS, f"{what}: {message}: {_TLS_HINT}")
    if code in _TIMEOUT_CODES:
        error_class = ErrorClass.TIMEOUT
    elif code in _AUTH_CODES or (code == _ERROR_RESPONSE and errno == _KXR_NOT_AUTHORIZED):
        error_class = ErrorClass.AUTH
    elif code == _ERROR_RESPONSE and errno == _KXR_NOT_FOUND:
        error_class = ErrorClass.NOT_FOUND
    elif code in _REFUSED_CODES:
        error_class = ErrorClass.SHORT_READ if reading else ErrorClass.REFUSED
    else:
        error_class = ErrorClass.SERVER_ERROR
    return ProbeError(error_class, f"{what}: {message}")


def no_tls_error(what: str) -> ProbeError:
    """TLS asked of a port that offers none (roots:// to a plain xrootd port, or a token,
    which goes only over TLS): no certificate is to blame."""
    return ProbeError(
        ErrorClass.TLS,
        f"{what}: the port {NO_TLS}: try root:// (without a token), or a port of the server "
        "that speaks TLS",
    )


class XRootDFile(RemoteFile):
    """A file opened with XrdCl; every call carries the time left to the deadline."""

    def __init__(self, url: str, options: OpenOptions) -> None:
        self._url = url
        self._deadline = options.deadline
        self._file = xrd.File()
        status, _ = self._file.open(url, OpenFlags.READ, timeout=self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"open {url}")
        status, info = self._file.stat(timeout=self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"stat {url}")
        self.size = int(info.size)
        self.served_by = _server_name(self._file.get_property("DataServer"), url)
        self.bytes_wire = 0
        self._limits: VectorLimits | None = None

    def read(self, offset: int, size: int) -> bytes:
        status, data = self._file.read(offset, size, self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"read {size} B at {offset}", reading=True)
        self.bytes_wire += len(data)
        return data  # type: ignore[no-any-return]

    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        status, info = self._file.vector_read(chunks, self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"readv of {len(chunks)} chunks", reading=True)
        size = int(info.size)
        self.bytes_wire += size
        return size

    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        done: queue.SimpleQueue[tuple[int, Any, int]] = queue.SimpleQueue()
        perf_ns = time.perf_counter_ns
        read = self._file.read
        timeout = self._deadline.timeout_s

        def issue(offset: int, size: int) -> None:
            started = perf_ns()

            def callback(status: Any, data: Any, _hosts: Any) -> None:
                done.put((perf_ns() - started, status, len(data) if status.ok else 0))

            status = read(offset, size, timeout(), callback)
            if not status.ok:
                raise status_error(status, f"async read {size} B at {offset}", reading=True)

        pending = iter(requests)
        outstanding = 0
        for offset, size in pending:
            issue(offset, size)
            outstanding += 1
            if outstanding == depth:
                break
        failure: ProbeError | None = None
        while outstanding:
            latency_ns, status, n_bytes = done.get()
            outstanding -= 1
            if not status.ok:
                failure = failure or status_error(status, "async read", reading=True)
                continue
            self.bytes_wire += n_bytes
            record(latency_ns, n_bytes)
            if failure is None:
                for offset, size in pending:
                    issue(offset, size)
                    outstanding += 1
                    break
        if failure is not None:
            raise failure

    def vector_limits(self) -> VectorLimits:
        if self._limits is None:
            self._limits = query_vector_limits(self._url, self._deadline.timeout_s())
        return self._limits

    def close(self) -> None:
        status, _ = self._file.close(timeout=self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"close {self._url}")


class XRootDWritableFile(WritableFile):
    """A file created with XrdCl (kXR_new: an existing file is never overwritten, 3018)."""

    def __init__(self, url: str, options: OpenOptions) -> None:
        self._url = url
        self._deadline = options.deadline
        self._file = xrd.File()
        mode = AccessMode.UR | AccessMode.UW | AccessMode.GR | AccessMode.OR
        status, _ = self._file.open(url, OpenFlags.NEW, mode, timeout=self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"create {url}")
        self.served_by = _server_name(self._file.get_property("DataServer"), url)

    def write(self, offset: int, data: bytes, timeout_s: int) -> None:
        status, _ = self._file.write(data, offset, len(data), timeout_s)
        if not status.ok:
            raise status_error(status, f"write {len(data)} B at {offset}")

    def close(self) -> None:
        status, _ = self._file.close(timeout=self._deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"close {self._url}")


def query_vector_limits(url: str, timeout_s: int) -> VectorLimits:
    """Ask the server for readv_iov_max and readv_ior_max; fall back to XRootD's defaults."""
    fs = xrd.FileSystem(_root_of(url))
    status, answer = fs.query(QueryCode.CONFIG, "readv_iov_max readv_ior_max", timeout=timeout_s)
    if not status.ok or not answer:
        return DEFAULT_VECTOR_LIMITS
    values = answer.decode().split()
    try:
        return VectorLimits(max_chunks=int(values[0]), max_chunk_bytes=int(values[1]))
    except (IndexError, ValueError):
        return DEFAULT_VECTOR_LIMITS


class XRootDBackend(Backend):
    """root://, xroot://: direct reads through XrdCl, copies through xrdcp."""

    def __init__(self) -> None:
        self._configured = False
        # One FileSystem per server for the client's metadata operations, as a job keeps one.
        self._filesystems: dict[str, Any] = {}

    def _filesystem(self, client_url: str) -> Any:
        root = _root_of(client_url)
        if root not in self._filesystems:
            self._filesystems[root] = xrd.FileSystem(root)
        return self._filesystems[root]

    def prepare(self, access: Access) -> None:
        # Copies ask XrdCl here too (copy_source, after xrdcp): never over another family.
        pin_network_stack(access)

    def _client_url(self, url: str, options: OpenOptions) -> str:
        if not self._configured:
            configure_client(options)
            self._configured = True
        return with_user(url, options.user)

    def open(self, url: str, options: OpenOptions) -> RemoteFile:
        return XRootDFile(self._client_url(url, options), options)

    def describe(self, url: str, options: OpenOptions) -> Negotiated:
        """The server's version (kXR_Qconfig "version"); TLS where roots:// or the token
        protocol (ztn needs it) asks for it. XrdCl reports neither TLS version nor cipher."""
        client_url = self._client_url(url, options)
        fs = xrd.FileSystem(_root_of(client_url))
        status, answer = fs.query(QueryCode.CONFIG, "version", timeout=options.deadline.timeout_s())
        version = None
        if status.ok and answer:
            text = answer.decode(errors="replace").strip()
            version = None if text in ("", "version") else f"XRootD {text}"
        if not _wants_tls(url, options):
            return Negotiated(version, None)
        tls = _negotiate_tls(url, options) or {"version": None, "cipher": None}
        return Negotiated(version, tls)

    def client_version(self, *, copies: bool) -> str | None:
        """Direct reads: the XRootD Python bindings' own XrdCl (`XRootD.client.__version__`);
        copies: the xrdcp on PATH, which may be another release."""
        if copies:
            return tool_version("xrdcp", "--version")
        return f"xrootd {xrd.__version__} (Python bindings)"

    def check_egress(self, url: str, options: OpenOptions) -> None:
        """The URL's host, and, when it is a redirector, the servers it would send us to:
        by the egress policy, and in a run with a credential, by where it may go."""
        super().check_egress(url, options)
        checks: list[Callable[[str], object]] = []
        if options.egress is not None:
            checks.append(options.egress.check_server)
        if options.access.auth != AuthMethod.NONE:
            checks.append(CredentialScope.of((url,), options.access.credential_hosts).check_server)
        if checks:
            check_redirect_targets(self._client_url(url, options), checks, options.deadline)

    def stat_size(self, url: str, options: OpenOptions) -> int:
        client_url = self._client_url(url, options)
        fs = xrd.FileSystem(_root_of(client_url))
        status, info = fs.stat(_path_of(client_url), timeout=options.deadline.timeout_s())
        if status.ok:
            return int(info.size)
        # _negotiate_tls raises with OpenSSL's reason, which XrdCl hides; None: the port
        # offers no TLS at all.
        if (
            status.code == _TLS_CODE
            and _wants_tls(url, options)
            and _negotiate_tls(url, options) is None
        ):
            raise no_tls_error(f"stat {url}")
        raise status_error(status, f"stat {url}")

    def file_facts(self, url: str, options: OpenOptions) -> FileFacts:
        """The size from stat, the adler32 from the server's checksum query (kXR_Qcksum,
        `xrdfs query checksum`): a server without `xrootd.chksum` answers 3013 "not
        supported", and so does a redirector not configured for checksums itself."""
        size = self.stat_size(url, options)
        adler32, adler32_from = self._adler32(url, options)
        return FileFacts(size, "XRootD stat", adler32, adler32_from)

    def _adler32(self, url: str, options: OpenOptions) -> tuple[str | None, str]:
        client_url = self._client_url(url, options)
        fs = xrd.FileSystem(_root_of(client_url))
        # cks.type picks adler32 on a server that computes several digests (5.5 ignores it).
        path = f"{_path_of(client_url)}?cks.type=adler32"
        status, answer = fs.query(QueryCode.CHECKSUM, path, timeout=options.deadline.timeout_s())
        if not status.ok:
            return None, f"the server's checksum query failed: {status.message.strip()}"
        return parse_checksum_answer(answer or b"")

    def create(self, url: str, size: int, options: OpenOptions) -> WritableFile:
        return XRootDWritableFile(self._client_url(url, options), options)

    def checksum(self, url: str, options: OpenOptions) -> str:
        """kXR_Qcksum on the client's FileSystem. A server without `xrootd.chksum` answers
        3013 (class checksum: it cannot vouch for what it stored); a timeout or a refusal
        keeps its own class."""
        client_url = self._client_url(url, options)
        fs = self._filesystem(client_url)
        path = f"{_path_of(client_url)}?cks.type=adler32"
        status, answer = fs.query(QueryCode.CHECKSUM, path, timeout=options.deadline.timeout_s())
        if not status.ok:
            error = status_error(status, f"checksum of {url}")
            if error.error_class == ErrorClass.SERVER_ERROR:
                raise ProbeError(ErrorClass.CHECKSUM, error.message)
            raise error
        adler32, why = parse_checksum_answer(answer or b"")
        if adler32 is None:
            raise ProbeError(ErrorClass.CHECKSUM, f"checksum of {url}: {why}")
        return adler32

    def delete(self, url: str, options: OpenOptions) -> None:
        client_url = self._client_url(url, options)
        fs = self._filesystem(client_url)
        status, _ = fs.rm(_path_of(client_url), timeout=options.deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"delete {url}")

    def list_names(self, url: str, options: OpenOptions) -> list[str]:
        client_url = self._client_url(url, options)
        fs = self._filesystem(client_url)
        status, listing = fs.dirlist(_path_of(client_url), timeout=options.deadline.timeout_s())
        if not status.ok:
            raise status_error(status, f"list {url}")
        return [str(entry.name) for entry in listing]

    def metadata_call(self, operation: str, url: str, options: OpenOptions) -> MetadataCall:
        """stat and dirlist on the client's one FileSystem; open-close with a fresh File
        each time (XrdCl does not reopen a File that failed once) on the same channel."""
        client_url = self._client_url(url, options)
        fs, path = self._filesystem(client_url), _path_of(client_url)
        if operation == "stat":
            return _checked(fs.stat, path, f"stat {url}")
        if operation == "list":
            return _checked(fs.dirlist, path, f"list {url}")
        if operation == "open":
            return _open_close(client_url)
        raise self.unsupported(operation)

    def copy_to_local(self, url: str, dest: Path, options: OpenOptions) -> CopyResult:
        client_url = with_user(url, options.user)
        seconds = options.deadline.timeout_s()
        env = dict(os.environ)
        env.update(
            XRD_CPUSEPGWRTRD="0",  # page reads with CRC32c make xrdcp 5.5 ~3x slower
            XRD_CPTIMEOUT=str(seconds),
            XRD_REQUESTTIMEOUT=str(seconds),
            XRD_STREAMTIMEOUT=str(seconds),
            XRD_CONNECTIONWINDOW=str(min(seconds, 60)),
            XRD_CONNECTIONRETRY="1",
            XRD_TIMEOUTRESOLUTION="1",
        )
        # No "--" before the URLs: xrdcp 5.5 stops reading its arguments there ("xrdcp: No
        # files specified"). Neither can be read as an option instead: check_url refused a
        # URL or host starting with "-", and dest is an absolute path.
        argv = ["xrdcp", "--nopbar", "--force", "--streams", str(options.streams)]
        run_copy_tool([*argv, client_url, str(dest.resolve())], env=env, deadline=options.deadline)
        return CopyResult(dest.stat().st_size, served_by="")

    def copy_source(self, url: str, options: OpenOptions) -> str:
        """The server xrdcp read from, as direct reads name it (XrdCl's DataServer): the
        endpoint itself, or for a redirector the data server it locates the file on. Asked
        after the copy, untimed: one protocol request, and a locate for a redirector."""
        url = with_user(url, options.user)
        fs = xrd.FileSystem(_root_of(url))
        timeout = options.deadline.timeout_s()
        status, info = fs.protocol(timeout=timeout)
        if not status.ok or not info.hostinfo & HostTypes.IS_MANAGER:
            return host_of(url)
        status, locations = fs.locate(_path_of(url), OpenFlags.NONE, timeout=timeout)
        if status.ok and locations is not None:
            for location in locations:
                return normalize_server(str(location.address))
        return host_of(url)


# The metadata calls are closures over what they need, called with the time left: no
# partial, no argument tuple (each ~0.1 us; at ~120 us an open-close on loopback, the Python
# around the call shows in the rate: docs/benchmarks.md).


def _checked(request: Callable[..., Any], path: str, what: str) -> MetadataCall:
    def call(timeout_s: int) -> None:
        status, _ = request(path, timeout=timeout_s)
        if not status.ok:
            raise status_error(status, what)

    return call


def _open_close(url: str) -> MetadataCall:
    """Both requests carry the time left when the operation started."""

    def call(timeout_s: int) -> None:
        file = xrd.File()
        status, _ = file.open(url, OpenFlags.READ, timeout=timeout_s)
        if not status.ok:
            raise status_error(status, f"open {url}")
        status, _ = file.close(timeout=timeout_s)
        if not status.ok:
            raise status_error(status, f"close {url}")

    return call


def parse_checksum_answer(answer: bytes) -> tuple[str | None, str]:
    """(adler32, where it came from) of a checksum query's answer, "adler32 1a2b3c4d"
    (NUL-terminated); None and why for another algorithm or a malformed value."""
    algorithm, _, value = answer.decode(errors="replace").strip("\x00 \n").partition(" ")
    value = value.strip()
    if algorithm.lower() != "adler32":
        return None, f"the server's checksum is {algorithm or 'empty'}, not adler32"
    if not _HEX32.fullmatch(value):
        return None, f"the server's adler32 {value!r} is not 1 to 8 hex digits"
    return f"{int(value, 16):08x}", "XRootD checksum query"


def check_redirect_targets(
    url: str,
    checks: Sequence[Callable[[str], object]],
    deadline: Deadline,
    levels: int = MAX_REDIRECTOR_LEVELS,
) -> None:
    """Before anything connects to them: the servers a redirector (an XRootD manager) locates
    the file on, level by level, each passed to `checks` (which raise ProbeError). XrdCl
    follows redirections on its own, so this is where they are seen first, by the names the
    redirector gives; a data server or a cache is not asked (it redirects no one)."""
    fs = xrd.FileSystem(_root_of(url))
    status, info = fs.protocol(timeout=deadline.timeout_s())
    if not status.ok:
        raise status_error(status, f"protocol {_root_of(url)}")
    if not info.hostinfo & HostTypes.IS_MANAGER:
        return
    if levels == 0:
        raise ProbeError(
            ErrorClass.EGRESS,
            f"refused: more than {MAX_REDIRECTOR_LEVELS} redirector levels to check at "
            f"{host_of(url)}",
        )
    for server, is_manager in _locate(fs, url, deadline):
        try:
            for check in checks:
                check(server)
        except ProbeError as exc:
            where = f"redirector {host_of(url)} sends clients to {server}"
            raise ProbeError(exc.error_class, f"{where}: {exc.message}") from None
        if is_manager:
            parts = urlsplit(url)
            user = f"{parts.username}@" if parts.username else ""
            next_url = parts._replace(netloc=f"{user}{server}").geturl()
            check_redirect_targets(next_url, checks, deadline, levels - 1)


def _locate(fs: Any, url: str, deadline: Deadline) -> list[tuple[str, bool]]:
    """(host:port, is a manager) of each location of the file. A redirector answers at once
    with what it knows (NOWAIT); knowing nothing yet, it is asked again and waited for."""
    path, what = _path_of(url), f"locate {_path_of(url)} at {host_of(url)}"
    status, info = fs.locate(path, OpenFlags.NOWAIT, timeout=deadline.timeout_s())
    locations = list(info) if status.ok and info is not None else []
    if not locations:
        status, info = fs.locate(path, OpenFlags.NONE, timeout=deadline.timeout_s())
        if not status.ok:
            raise status_error(status, what)
        locations = list(info) if info is not None else []
    if not locations:
        raise ProbeError(ErrorClass.NOT_FOUND, f"{what}: no server has the file")
    return [(normalize_server(str(loc.address)), bool(loc.is_manager)) for loc in locations]


def _wants_tls(url: str, options: OpenOptions) -> bool:
    """roots:// asks for TLS, and so does ztn (a token goes only over TLS)."""
    scheme = urlsplit(url).scheme.lower()
    return scheme in ("roots", "xroots") or options.access.auth == AuthMethod.TOKEN


def _negotiate_tls(url: str, options: OpenOptions) -> dict[str, str | None] | None:
    parts = urlsplit(url)
    return xroot_tls.negotiate(
        parts.hostname or "",
        parts.port or DEFAULT_PORT,
        ca_dir=options.access.ca_dir,
        egress=options.egress,
        timeout_s=options.deadline.timeout_s(),
        family=options.access.address_family,
    )


def _server_name(data_server: str | None, url: str) -> str:
    """'root://u@127.0.0.1:1094/' -> '127.0.0.1:1094'."""
    if not data_server:
        return host_of(url)
    return host_of(data_server if "://" in data_server else f"root://{data_server}")


def _root_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _path_of(url: str) -> str:
    path = urlsplit(url).path
    return "/" + path.lstrip("/")
