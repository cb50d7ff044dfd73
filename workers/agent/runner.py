"""One run, as the agent measures it: claim it from the server, open its sealed credential,
add what this host decides (egress policy, CA folder, file roots), measure with the engine
while reporting progress, and hand in the run JSON.

The same steps as a deployment's own worker (webapp.campaigns.services.run_execute), each
that touched the database now a call to the server's agent API.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from nacl.public import PrivateKey

from workers.agent.api import AgentApi, AgentApiError, Claim
from workers.agent.config import AgentConfig, HostSettings
from workers.agent.sealing import SealingError, open_sealed
from workers.engine.credentials import Credential, CredentialKind
from workers.engine.driver import Progress, run_probe
from workers.engine.errors import ErrorClass, InvalidParams, OutsideFileRoots
from workers.engine.metrics import ClientResult
from workers.engine.params import RunParams

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
    with _Progress(api, run_id) as progress:
        result = run_probe(params, on_progress=progress.update, should_cancel=progress.cancelled)
    api.result(run_id, dict(result.to_json()))


def _params(claim: Claim, config: AgentConfig, key: PrivateKey, host: HostSettings) -> RunParams:
    """The claimed run's parameters with its credential opened and this host's settings."""
    credential = None
    if claim.credential is not None:
        opened = open_sealed(
            claim.credential, key, run_id=claim.run_id, vantage_point=config.vantage_point
        )
        if opened.kind == CredentialKind.TOKEN:
            credential = Credential.token(opened.secret)
        else:
            credential = Credential.x509_proxy(opened.secret)
    params = replace(
        RunParams.from_json(claim.params),
        credential=credential,
        egress=host.egress,
        ca_dir=host.ca_dir,
        file_roots=host.file_roots,
    )
    params.validate()
    return params


class _Progress:
    """Reports a running run's progress every PROGRESS_S from a thread, and notices a cancel
    (the server's answer). A report that fails is logged and the next one tries again."""

    def __init__(self, api: AgentApi, run_id: int) -> None:
        self.api = api
        self.run_id = run_id
        self._client_bytes: tuple[int, ...] = ()
        self._finished: tuple[ClientResult, ...] = ()
        self._reported: set[int] = set()
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{run_id}", daemon=True)

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def update(self, progress: Progress) -> None:
        # Called by the engine several times a second: only kept for the next report.
        self._client_bytes = progress.client_bytes
        self._finished = progress.finished

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_S):
            finished = [c.to_json() for c in self._finished if c.client not in self._reported]
            try:
                if self.api.progress(self.run_id, self._client_bytes, [dict(f) for f in finished]):
                    self._cancel.set()
            except AgentApiError as exc:
                log.warning("run %s: progress not reported (%s)", self.run_id, exc)
                continue
            self._reported.update(record["client"] for record in finished)
