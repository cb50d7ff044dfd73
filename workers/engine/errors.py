"""Errors of a measurement, each with the error class the run JSON reports."""

from __future__ import annotations

from enum import StrEnum


class ErrorClass(StrEnum):
    """Why a client failed, as the run JSON names it (docs/engine.md)."""

    TIMEOUT = "timeout"
    REFUSED = "refused"
    # Credentials refused, expired, or not covering the file (token scope).
    AUTH = "auth"
    # The server's certificate is not verifiable (expired, unknown CA, name mismatch).
    TLS = "tls"
    NOT_FOUND = "not-found"
    SHORT_READ = "short-read"
    CHECKSUM = "checksum"
    SERVER_ERROR = "server-error"
    CANCELLED = "cancelled"
    # A third-party copy failed on one side: the source refused or failed to send, or the
    # destination refused the copy or failed to store it.
    TPC_SOURCE = "tpc-source"
    TPC_DESTINATION = "tpc-destination"
    # The egress policy refused the endpoint's address: nothing was sent to it.
    EGRESS = "egress"
    # A fault of the tester's own (a bug, a broken worker host, scratch out of room).
    HARNESS = "harness"
    # The worker stopped reporting mid-run (killed, its host lost): the reaper ended it.
    LOST = "lost"


# What a TLS error says when the port speaks no TLS at all (roots:// to a plain xrootd port):
# no certificate is involved, so nothing is said of certificates or CA folders.
NO_TLS = "does not speak TLS"

# The tester's faults, not the endpoint's: never counted against a site (docs/engine.md).
# Credential problems found before any request reach the endpoint count too (the watch
# decides those from the error's phase, not its class alone).
TESTER_FAULT_CLASSES = frozenset({ErrorClass.HARNESS, ErrorClass.EGRESS, ErrorClass.LOST})

# The error's "phase" in the run JSON when a credential problem was found before any request
# reached the endpoint (a token or proxy expired, an oauth issuer unreachable or refusing the
# client): the tester's fault, whatever its class (auth, tls, timeout, ...).
CREDENTIAL_PHASE = "credential"


class ProbeError(Exception):
    """A client's measurement failed against the endpoint (not a bug of ours)."""

    def __init__(
        self, error_class: ErrorClass, message: str, *, bytes_received: int = 0, phase: str = ""
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        # CREDENTIAL_PHASE when found before any request reached the endpoint; "" otherwise.
        self.phase = phase
        # Bytes of the failed request that did arrive (a body cut off or dripping past the
        # deadline): they count as read, as the bytes of the requests before it do.
        self.bytes_received = bytes_received

    def __str__(self) -> str:
        return f"{self.error_class}: {self.message}"


class InvalidParams(ValueError):
    """The requested run is malformed; nothing was started. `field` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class OutsideFileRoots(InvalidParams):
    """A file:// URL outside the folders a worker may read: the egress policy of the local
    file system (class egress when a stored endpoint meets it at run time)."""
