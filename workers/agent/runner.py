"""One run, as the agent measures it: claim it from the server, open its sealed credential,
add what this host decides (egress policy, CA folder, file roots), measure with the engine
while reporting progress, and hand in the run JSON. And the cleanup of a lost run: delete
what it left, with the credential the server sealed for it, and report what was deleted.

The same steps as a deployment's own worker (webapp.campaigns.services.run_execute,
webapp.campaigns.cleanups.run_cleanup), each that touched the database now a call to the
server's agent API.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import replace

from nacl.public import PrivateKey

from workers.agent.api import AgentApi, AgentApiError, Claim, Cleanup
from workers.agent.config import AgentConfig, HostSettings
from workers.agent.sealing import SealingError, open_sealed
from workers.engine.beats import ProgressBeats
from workers.engine.cleanup import cleanup_written
from workers.engine.credentials import Credential, CredentialKind, private_run_file
from workers.engine.driver import run_probe
from workers.engine.errors import ErrorClass, InvalidParams, OutsideFileRoots, ProbeError
from workers.engine.params import RunParams
from workers.engine.results import ClientRecordJson

log = logging.getLogger(__name__)

# How often a running run reports its progress (as a deployment's worker beats: the server's
# reaper takes a run whose attempts stop beating for lost).
PROGRESS_S = 2.0


def measure(
    run_id: int,
    *,
    api: AgentApi,
    config: AgentConfig,
    key: PrivateKey,
    host: HostSettings,
    worker: str,
) -> None:
    """Measure run `run_id` if the server gives it to us; report what happened."""
    claim = api.claim(run_id, worker)
    if claim is None:
        log.info("run %s: nothing to measure now", run_id)
        return
    try:
        params = _params(claim, config, key, host)
    except InvalidParams as exc:
        error_class = ErrorClass.EGRESS if isinstance(exc, OutsideFileRoots) else ErrorClass.HARNESS
        api.failure(run_id, f"{exc.field}: {exc.message}", str(error_class))
        return
    except SealingError as exc:
        api.failure(run_id, f"the run's credential: {exc}", str(ErrorClass.HARNESS), "credential")
        return
    try:
        trace = api.trace(claim.trace_sha256) if claim.trace_sha256 else None
    except (AgentApiError, UnicodeDecodeError) as exc:
        api.failure(run_id, f"trace: {exc}", str(ErrorClass.HARNESS))
        return
    with (
        _with_trace(params, trace) as params,
        _progress(api, run_id) as progress,
    ):
        result = run_probe(params, on_progress=progress.update, should_cancel=progress.cancelled)
    api.result(run_id, dict(result.to_json()))


def clean_up(
    cleanup: Cleanup, *, api: AgentApi, config: AgentConfig, key: PrivateKey, host: HostSettings
) -> None:
    """Delete what lost run `cleanup.run_id` left, with its sealed credential opened into a
    0600 file of a private folder removed after (as a run's), under this host's settings;
    report the count deleted, or why not (never a secret: the engine's messages hold none)."""
    try:
        credential = (
            None
            if cleanup.credential is None
            else _opened(cleanup.credential, cleanup.run_id, config, key)
        )
        deleted = cleanup_written(
            run_tag=cleanup.run_tag,
            urls=cleanup.urls,
            credential=credential,
            credential_hosts=cleanup.credential_hosts,
            ca_dir=host.ca_dir,
            egress=host.egress,
            file_roots=host.file_roots,
        )
    except SealingError as exc:
        api.cleanup_failed(cleanup.run_id, f"credential: {exc}")
        return
    except InvalidParams as exc:
        api.cleanup_failed(cleanup.run_id, f"{exc.field}: {exc.message}")
        return
    except ProbeError as exc:
        api.cleanup_failed(cleanup.run_id, f"{exc.error_class}: {exc.message}")
        return
    log.info("run %s: cleanup deleted %d files", cleanup.run_id, len(deleted))
    api.cleanup_done(cleanup.run_id, len(deleted))


def clean_up_due(*, api: AgentApi, config: AgentConfig, key: PrivateKey, host: HostSettings) -> int:
    """Ask the server for this vantage point's due cleanups and run each; how many ran."""
    cleanups = api.cleanups()
    for cleanup in cleanups:
        clean_up(cleanup, api=api, config=config, key=key, host=host)
    return len(cleanups)


@contextlib.contextmanager
def _with_trace(params: RunParams, text: str | None) -> Iterator[RunParams]:
    """A replay's parameters with its trace (fetched by hash) in a 0600 file of a private run
    folder on this host, removed after the run; other runs' unchanged."""
    if text is None:
        yield params
        return
    with private_run_file("trace.csv", text) as path:
        yield replace(params, trace=path)


def _params(claim: Claim, config: AgentConfig, key: PrivateKey, host: HostSettings) -> RunParams:
    """The claimed run's parameters with its credentials opened and this host's settings."""
    credential, destination_credential = (
        None if sealed is None else _opened(sealed, claim.run_id, config, key)
        for sealed in (claim.credential, claim.destination_credential)
    )
    params = replace(
        RunParams.from_json(claim.params),
        credential=credential,
        destination_credential=destination_credential,
        egress=host.egress,
        ca_dir=host.ca_dir,
        file_roots=host.file_roots,
    )
    params.validate()
    return params


def _opened(sealed: str, run_id: int, config: AgentConfig, key: PrivateKey) -> Credential:
    """A credential sealed to this vantage point's key for run `run_id`."""
    opened = open_sealed(sealed, key, run_id=run_id, vantage_point=config.vantage_point)
    if opened.kind == CredentialKind.TOKEN:
        return Credential.token(opened.secret)
    return Credential.x509_proxy(opened.secret)


def _progress(api: AgentApi, run_id: int) -> ProgressBeats:
    """Reports a running run's progress to the server every PROGRESS_S (its answer says
    whether the run was cancelled); a report that fails is logged and the next one tries
    again."""

    def report(client_bytes: tuple[int, ...], finished: list[ClientRecordJson]) -> bool | None:
        try:
            return api.progress(run_id, client_bytes, [dict(record) for record in finished])
        except AgentApiError as exc:
            log.warning("run %s: progress not reported (%s)", run_id, exc)
            return None

    return ProgressBeats(report, interval_s=PROGRESS_S, name=f"progress-{run_id}")
