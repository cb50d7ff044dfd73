"""GridFTP (gsiftp://) and plain FTP endpoints through globus-url-copy: whole-file copies only.

Reading in place would open a data connection per read and exhaust ports, so `open` refuses;
the engine's parameter check turns such runs away before they reach this module.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from urllib.parse import quote, urlsplit

from workers.engine.backends.base import Backend, CopyResult, FileFacts, OpenOptions, RemoteFile
from workers.engine.backends.tools import run_copy_tool, tool_version
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.protocols import DEFAULT_PORTS, GRIDFTP

TOOL = "globus-url-copy"
_DUMPED_SIZE = re.compile(r"\bsize=(\d+);")
# globus-url-copy's own words for failures that the generic copy-tool phrases miss.
_GRIDFTP_ERRORS = (
    (re.compile(r"path_not_found", re.IGNORECASE), ErrorClass.NOT_FOUND),
    (
        re.compile(r"^\s*530[ -]|credential|gssapi|gss_|login incorrect", re.I | re.M),
        ErrorClass.AUTH,
    ),
)
NOT_A_READ_PROTOCOL = "gridftp is a copy protocol: use method copy or stage"


class GridFtpBackend(Backend):
    """gsiftp:// and ftp:// endpoints, copied whole with globus-url-copy."""

    def open(self, url: str, options: OpenOptions) -> RemoteFile:
        raise ProbeError(ErrorClass.SERVER_ERROR, NOT_A_READ_PROTOCOL)

    def client_version(self, *, copies: bool) -> str | None:
        return tool_version(TOOL, "-version")

    def round_trip_s(self, url: str, options: OpenOptions) -> float:
        """None better than the preflight's stats: globus-url-copy connects and logs in
        again for every call, so one more would cost a process and a login, not one round
        trip (infinity leaves the fastest stat as the preflight's figure)."""
        return math.inf

    def stat_size(self, url: str, options: OpenOptions) -> int:
        """The size from the server's MLST, asked without moving data.

        globus-url-copy has no stat command, but `-sync -sync-level 1` compares the source's
        size (MLST on the control channel) with an existing destination, and `-do` writes the
        planned transfer, with `size=N`, to a file instead of copying. The destination is an
        empty file: when nothing is planned the sizes matched, so the source is empty too.
        """
        _check_url(url)
        with tempfile.TemporaryDirectory(prefix="fedprobe-gridftp-") as scratch:
            probe = Path(scratch, "probe")
            probe.touch()
            dump = Path(scratch, "plan")
            sync = ["-sync", "-sync-level", "1", "-do", str(dump)]
            _run(url, [TOOL, *sync, "--", url, _file_url(probe)], options)
            planned = dump.read_text() if dump.exists() else ""
        match = _DUMPED_SIZE.search(planned)
        return int(match.group(1)) if match else 0

    def file_facts(self, url: str, options: OpenOptions) -> FileFacts:
        """The size as stat_size finds it; no checksum: GridFTP's CKSM command is not
        reachable through globus-url-copy without copying the file."""
        return FileFacts(
            self.stat_size(url, options),
            "globus-url-copy's transfer plan (the server's MLST)",
            None,
            "GridFTP gives no checksum here (globus-url-copy cannot ask for one without copying)",
        )

    def copy_to_local(self, url: str, dest: Path, options: OpenOptions) -> CopyResult:
        _check_url(url)
        parallel = ["-p", str(options.streams)] if options.streams > 1 else []
        try:
            _run(url, [TOOL, *parallel, "--", url, _file_url(dest)], options)
        except BaseException:
            # globus-url-copy leaves an empty file behind when the source is missing.
            dest.unlink(missing_ok=True)
            raise
        return CopyResult(dest.stat().st_size, served_by(url))


def served_by(url: str) -> str:
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)}"


def _check_url(url: str) -> None:
    """Only gsiftp:// and ftp:// URLs reach the tool: nothing it could take for an option."""
    scheme = urlsplit(url).scheme.lower()
    if url.startswith("-") or scheme not in GRIDFTP.scheme_names:
        raise InvalidParams("url", f"{url!r} is not a gsiftp:// or ftp:// URL")


def _file_url(path: Path) -> str:
    return "file://" + quote(str(path.absolute()))


def _run(url: str, argv: list[str], options: OpenOptions) -> None:
    """Run globus-url-copy; its errors name the URL and say what the server answered."""
    try:
        run_copy_tool(argv, deadline=options.deadline)
    except ProbeError as exc:
        raise ProbeError(_reclassify(exc), f"{url}: {exc.message}") from exc


def _reclassify(exc: ProbeError) -> ErrorClass:
    if exc.error_class is not ErrorClass.SERVER_ERROR:
        return exc.error_class
    for pattern, error_class in _GRIDFTP_ERRORS:
        if pattern.search(exc.message):
            return error_class
    return exc.error_class
