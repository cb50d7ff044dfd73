"""Running a copy tool (xrdcp, globus-url-copy): argv lists, a deadline, classified errors."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.processes import tool_argv

# Phrases in copy tools' error output, checked in this order.
_STDERR_CLASSES = (
    (
        ("tls error", "certificate verify failed", "unable to get local issuer"),
        ErrorClass.TLS,
    ),
    (("no such file", "not found", "does not exist", "3011"), ErrorClass.NOT_FOUND),
    (("permission denied", "not authorized", "unauthorized", "auth", "3010"), ErrorClass.AUTH),
    (("connection refused", "connect() failed", "unable to connect"), ErrorClass.REFUSED),
    (("timed out", "timeout", "expired"), ErrorClass.TIMEOUT),
)


# A version is one short line; anything longer is not one.
_VERSION_MAX_CHARS = 100
_VERSION_TIMEOUT_S = 10.0


@functools.cache
def tool_version(tool: str, flag: str) -> str | None:
    """`tool` and its version as `tool flag` prints it ("xrdcp v5.5.3", "globus-url-copy
    10.12"), asked once per process; None when the tool is missing or says nothing. Tools
    print it on stderr, some with a non-zero exit status (globus-url-copy): both are read."""
    path = shutil.which(tool)
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, flag],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    output = (done.stdout + done.stderr).decode(errors="replace").strip()
    first = output.splitlines()[0].strip() if output else ""
    version = first.removeprefix(f"{tool}:").removeprefix(tool).strip()
    if not version or len(version) > _VERSION_MAX_CHARS:
        return None
    return f"{tool} {version}"


def classify_tool_error(stderr: str) -> ErrorClass:
    text = stderr.lower()
    for phrases, error_class in _STDERR_CLASSES:
        if any(phrase in text for phrase in phrases):
            return error_class
    return ErrorClass.SERVER_ERROR


def run_copy_tool(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, deadline: Deadline
) -> None:
    """Run a copy tool to completion within the deadline; raise ProbeError on failure.

    Never through a shell. The tool stays in the client's process group, so a client
    killed by its run (deadline, cancel) takes its copy tool with it.
    """
    if shutil.which(argv[0]) is None:
        raise ProbeError(ErrorClass.SERVER_ERROR, f"{argv[0]} is not installed")
    try:
        process = subprocess.Popen(
            tool_argv(list(argv)),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise ProbeError(ErrorClass.SERVER_ERROR, f"{argv[0]} is not installed") from exc
    try:
        _, stderr = process.communicate(timeout=max(0.1, deadline.remaining()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise ProbeError(ErrorClass.TIMEOUT, f"{argv[0]} did not finish by the deadline") from None
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        message = stderr.decode(errors="replace").strip() or f"exit status {process.returncode}"
        raise ProbeError(classify_tool_error(message), f"{argv[0]}: {message[-500:]}")
