"""A run's deadline, shared by every client and passed down to the protocol libraries."""

from __future__ import annotations

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
