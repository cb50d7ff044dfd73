"""A running run's progress beats (workers/engine/beats.py, shared by a deployment's worker
and a remote vantage point's agent): each client's record is reported once it is delivered,
a report that fails is tried again at the next beat, a cancel is noticed, and `after` runs
in the beats' thread when they stop."""

from __future__ import annotations

import threading
import time

from workers.engine.beats import ProgressBeats
from workers.engine.driver import Progress
from workers.engine.metrics import ClientResult
from workers.engine.results import ClientRecordJson

INTERVAL_S = 0.01


def progress(*finished: int) -> Progress:
    records = tuple(ClientResult(client=c) for c in finished)
    return Progress(0, 0, len(finished), 2, 0.0, 1.0, client_bytes=(5, 7), finished=records)


def wait_for(done: threading.Event) -> None:
    assert done.wait(5), "the beats did not get there within 5 s"


def test_a_failed_report_is_tried_again_and_a_record_is_delivered_once() -> None:
    calls: list[list[int]] = []
    delivered = threading.Event()
    after: list[str] = []

    def report(client_bytes: tuple[int, ...], finished: list[ClientRecordJson]) -> bool | None:
        calls.append([record["client"] for record in finished])
        if len(calls) == 1:
            raise RuntimeError("the database went away")  # not one it expects: beats go on
        if len(calls) == 2:
            return None  # not delivered: the records come again
        if len(calls) >= 4:
            delivered.set()
        return False

    beats = ProgressBeats(
        report,
        interval_s=INTERVAL_S,
        name="beats-test",
        after=lambda: after.append(threading.current_thread().name),
    )
    with beats:
        beats.update(progress(0))
        wait_for(delivered)
    assert calls[:4] == [[0], [0], [0], []]
    assert not beats.cancelled()
    assert after == ["beats-test"]


def test_an_answer_to_cancel_is_noticed() -> None:
    beats = ProgressBeats(lambda _bytes, _finished: True, interval_s=INTERVAL_S, name="cancel")
    with beats:
        deadline = time.monotonic() + 5
        while not beats.cancelled():
            assert time.monotonic() < deadline, "the cancel was not noticed within 5 s"
            time.sleep(INTERVAL_S)
