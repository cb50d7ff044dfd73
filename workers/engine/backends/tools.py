"""Running a copy tool (xrdcp, globus-url-copy): argv lists, a deadline, classified errors."""

from __future__ import annotations

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
