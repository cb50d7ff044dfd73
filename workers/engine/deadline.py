"""A run's deadline, shared by every client and passed down to the protocol libraries."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from workers.engine.errors import ErrorClass, ProbeError


@dataclass(frozen=True)
class Deadline:
    """An absolute point on the wall clock (time.time()) by which a client must be done.

    Wall-clock rather than monotonic so it means the same in every client process.
    """

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.time() + seconds)

    def remaining(self) -> float:
        return self.at - time.time()

    def timeout_s(self) -> int:
        """Whole seconds left, at least 1: what XRootD and the copy tools take as a timeout."""
        return max(1, int(self.remaining()))

    def check(self, what: str) -> None:
        if self.remaining() <= 0:
            raise ProbeError(ErrorClass.TIMEOUT, f"deadline passed during {what}")


NS_PER_S = 1_000_000_000


class Countdown:
    """A deadline's whole seconds left (at least 1, as Deadline.timeout_s) at a time read off
    time.perf_counter_ns, which a request loop already reads to time each request: the loop
    asks `at` only when the value changes (once a second), so that every request carries the
    time left at its start for one comparison. Calling timeout_s for each request (a method
    call, the wall clock, int and max: ~0.2 us) took 2.5% off an open-close storm on loopback
    (~120 us an operation; docs/benchmarks.md)."""

    def __init__(self, deadline: Deadline) -> None:
        self._end_ns = time.perf_counter_ns() + int(deadline.remaining() * NS_PER_S)

    def at(self, now_ns: int) -> tuple[int, int]:
        """(the whole seconds left at `now_ns`, at least 1; the perf_counter_ns from which
        there are fewer). Past the last whole second the answer stays 1 for good."""
        left = (self._end_ns - now_ns) // NS_PER_S
        if left <= 1:
            return 1, sys.maxsize
        return left, self._end_ns - left * NS_PER_S + 1
