"""Workflows over sites and endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import ProtectedError

from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.engine import (
    InvalidParams,
    Method,
    Pattern,
    ProbeError,
    RunParams,
    RunStatus,
    run_probe,
)
from workers.engine.credentials import CredentialKind, scope_covers
from workers.engine.protocols import protocol_of
from workers.engine.results import RunJson

# In VAR_DIR: the host's CA folder and the lab's CA, merged (settings.LOCAL_CA_DIR).
LOCAL_CA_FOLDER = "ca"
# A connection test reads one small block from the web host: it answers within this.
CONNECTION_TIMEOUT_S = 10
CONNECTION_READ_SIZE = 4096


def vantage_point_local() -> VantagePoint:
    """VantagePoint.local(), by the name lab_register, bootstrap, tests and benches call."""
    return VantagePoint.local()


def local_ca_dir() -> Path:
    """The embedded mode's CA folder (settings.LOCAL_CA_DIR): made by `lab register`."""
    return Path(settings.VAR_DIR) / LOCAL_CA_FOLDER


def endpoint_set_enabled(*, endpoint: Endpoint, enabled: bool) -> None:
    """Enable or disable an endpoint: campaigns launch no runs on a disabled one."""
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=enabled)
    endpoint.enabled = enabled


@transaction.atomic
def endpoint_file_add(
    *, endpoint: Endpoint, path: str, size: int, adler32: str = "", is_default: bool = False
) -> TestFile:
    """Add a test file to an endpoint; a new default file replaces the old default."""
    if is_default:
        endpoint.files.filter(is_default=True).update(is_default=False)
    return TestFile.objects.create(
        endpoint=endpoint, path=path, size=size, adler32=adler32, is_default=is_default
    )


def endpoint_file_remove(*, test_file: TestFile) -> bool:
    """Remove a test file; False (and nothing removed) when runs have read it."""
    try:
        with transaction.atomic():
            test_file.delete()
    except ProtectedError:
        return False
    return True


@dataclass(frozen=True)
class ConnectionCheck:
    """What a connection test found: timings, the serving host and what was negotiated, or
    why it failed; and what was seen before trying (a token's scopes not covering the file)."""

    ok: bool
    url: str = ""
    open_s: float | None = None
    ttfb_s: float | None = None
    served_by: tuple[str, ...] = ()
    error_class: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    auth: str = ""
    tls_version: str = ""
    tls_cipher: str = ""
    server_version: str = ""


def endpoint_test_connection(*, endpoint: Endpoint) -> ConnectionCheck:
    """Read one small block of the endpoint's default test file from this host.

    The parameters are a run's (URL, checksum, then Endpoint.engine_params: file roots,
    egress policy, credential, CA folder), cut down to one client, one read
    and a short timeout. Copy-only protocols (GridFTP) copy the smallest test file instead.
    The engine runs the preflight and the client in processes of their own: nothing of the
    credential stays in the web process's environment.
    """
    copy_only = protocol_of(endpoint.protocol).copy_only
    test_file = _smallest_file(endpoint) if copy_only else endpoint.default_file
    if test_file is None:
        return ConnectionCheck(
            ok=False,
            error_class="no-test-file",
            message=f"{endpoint.name} has no test file: add one to test the connection",
        )
    try:
        params = _connection_params(endpoint, test_file, copy_only)
    except InvalidParams as exc:
        return ConnectionCheck(ok=False, url=test_file.url, error_class="invalid", message=str(exc))
    except ProbeError as exc:
        return ConnectionCheck(
            ok=False, url=test_file.url, error_class=str(exc.error_class), message=exc.message
        )
    warnings = _scope_warnings(params, test_file.url)
    try:
        result = run_probe(params).to_json()
    except InvalidParams as exc:
        return ConnectionCheck(
            ok=False, url=test_file.url, error_class="invalid", message=str(exc), warnings=warnings
        )
    return _connection_check(test_file.url, result, warnings)


def _scope_warnings(params: RunParams, url: str) -> tuple[str, ...]:
    """A token whose WLCG scopes do not cover reading the file's path is refused by the
    endpoint: say so before trying (an opaque token, or one without scopes, tells nothing)."""
    credential = params.credential
    if credential is None or credential.kind != CredentialKind.TOKEN:
        return ()
    try:
        scopes = credential.info().scopes
    except InvalidParams:
        return ()
    path = "/" + urlsplit(url).path.lstrip("/")
    if not scopes or scope_covers(scopes, path):
        return ()
    return (
        f"the token's scopes ({' '.join(scopes)}) do not cover reading {path}: "
        f"it needs storage.read:{path} or a scope above it",
    )


def _smallest_file(endpoint: Endpoint) -> TestFile | None:
    return endpoint.files.order_by("size", "path").first()


def _connection_params(endpoint: Endpoint, test_file: TestFile, copy_only: bool) -> RunParams:
    read_size = min(CONNECTION_READ_SIZE, max(1, test_file.size))
    measured = RunParams(
        urls=(test_file.url,),
        method=Method.COPY if copy_only else Method.DIRECT,
        pattern=Pattern.SEQUENTIAL,
        read_size=read_size,
        fraction=min(1.0, read_size / max(1, test_file.size)),
        clients=1,
        files=1,
        timeout_s=CONNECTION_TIMEOUT_S,
        adler32=((test_file.url, test_file.adler32),) if test_file.adler32 else (),
    )
    return endpoint.engine_params(measured)


def _connection_check(url: str, result: RunJson, warnings: tuple[str, ...]) -> ConnectionCheck:
    if result["status"] == RunStatus.SUCCEEDED:
        tls = result.get("tls") or {}
        return ConnectionCheck(
            ok=True,
            url=url,
            open_s=result.get("open_s"),
            ttfb_s=result.get("ttfb_s"),
            served_by=tuple(result.get("served_by") or ()),
            warnings=warnings,
            auth=result.get("auth") or "",
            tls_version=tls.get("version") or "",
            tls_cipher=tls.get("cipher") or "",
            server_version=result.get("server_version") or "",
        )
    errors = result.get("errors") or []
    first = errors[0] if errors else {"class": result["status"], "message": ""}
    return ConnectionCheck(
        ok=False,
        url=url,
        error_class=first["class"],
        message=first["message"],
        warnings=warnings,
    )
