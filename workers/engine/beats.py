"""A running run's progress, reported from a thread every few seconds: each client's bytes so
far and the records of the clients that have ended, with the answer whether the run is to be
cancelled. A deployment's worker reports to the database (webapp.campaigns.services), a
remote vantage point's agent to the server (workers.agent.runner); if either dies, the
reports stop and the server's reaper ends the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from workers.engine.driver import Progress
from workers.engine.metrics import ClientResult
from workers.engine.results import ClientRecordJson

log = logging.getLogger(__name__)

# report(client_bytes, newly finished records): True to cancel the run, False to go on, None
# when the report was not delivered (a database restarting, a server down): the next one
# carries those records again. A report handles the failures it expects itself.
Report = Callable[[tuple[int, ...], list[ClientRecordJson]], bool | None]


class ProgressBeats:
    """Calls `report` every `interval_s` while the run runs (a context manager), from a thread
    named `name`; `after` runs in that thread when it stops (to close what it opened)."""

    def __init__(
        self,
        report: Report,
        *,
        interval_s: float,
        name: str,
        after: Callable[[], None] | None = None,
    ) -> None:
        self._report = report
        self._interval_s = interval_s
        self._after = after
        self._client_bytes: tuple[int, ...] = ()
        self._finished: tuple[ClientResult, ...] = ()
        self._reported: set[int] = set()
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> ProgressBeats:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def update(self, progress: Progress) -> None:
        """The engine's on_progress: called several times a second, only kept for the next
        report."""
        self._client_bytes = progress.client_bytes
        self._finished = progress.finished

    def cancelled(self) -> bool:
        """The engine's should_cancel."""
        return self._cancel.is_set()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval_s):
                try:
                    self._beat()
                except Exception:
                    # Beats that stopped would make the reaper end a run still measuring:
                    # say it, and try again at the next beat.
                    log.exception("%s: a report failed", self._thread.name)
        finally:
            if self._after is not None:
                self._after()

    def _beat(self) -> None:
        finished = [c.to_json() for c in self._finished if c.client not in self._reported]
        answer = self._report(self._client_bytes, finished)
        if answer is None:
            return
        if answer:
            self._cancel.set()
        self._reported.update(record["client"] for record in finished)
