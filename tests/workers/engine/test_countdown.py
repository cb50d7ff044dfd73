"""deadline.Countdown: the whole seconds left that each request of a storm or a write loop
carries, asked once a second instead of per request."""

from __future__ import annotations

import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from workers.engine.deadline import NS_PER_S, Countdown, Deadline


@given(
    left_s=st.floats(min_value=-10.0, max_value=6 * 3600.0),
    later_ns=st.integers(min_value=0, max_value=7 * 3600 * NS_PER_S),
)
def test_the_seconds_drop_by_one_exactly_where_it_says_and_never_below_one(
    left_s: float, later_ns: int
) -> None:
    countdown = Countdown(Deadline.after(left_s))
    now = time.perf_counter_ns() + later_ns
    seconds, fewer_at = countdown.at(now)
    assert seconds >= 1
    if seconds == 1:
        assert fewer_at == sys.maxsize  # and so it stays
        assert countdown.at(now + 100 * NS_PER_S)[0] == 1
        return
    assert now < fewer_at <= now + NS_PER_S
    assert countdown.at(fewer_at - 1) == (seconds, fewer_at)
    assert countdown.at(fewer_at)[0] == seconds - 1
    assert countdown.at(fewer_at + (seconds - 2) * NS_PER_S)[0] == 1


def test_it_says_what_the_deadline_says() -> None:
    for left_s in (0.2, 1.5, 2.0, 59.7, 3600.0):
        deadline = Deadline.after(left_s)
        seconds, _ = Countdown(deadline).at(time.perf_counter_ns())
        # The two clocks are read microseconds apart: at a whole second, one may be past it.
        assert seconds in (deadline.timeout_s(), deadline.timeout_s() + 1)
