"""Where two curves over the fractions of a file cross: the shared reading of a crossover,
used by the advice (webapp/advice/answers.py) and the campaign results page
(webapp/dashboards/selectors/results.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def crossings(fractions: Sequence[float], gaps: Sequence[float]) -> list[tuple[float, bool]]:
    """Where the time difference (direct - copy) changes sign: (fraction, whether copying
    becomes faster). Between neighbours the zero is interpolated; over measured ties, it is
    the first tie."""
    found = []
    last = None  # the index of the last gap that was not a tie
    for i, gap in enumerate(gaps):
        if gap == 0:
            continue
        if last is not None and (gap > 0) != (gaps[last] > 0):
            if i == last + 1:
                low, high = gaps[last], gap
                x = fractions[last] + (fractions[i] - fractions[last]) * -low / (high - low)
            else:
                x = fractions[last + 1]
            found.append((x, gap > 0))
        last = i
    return found


def percent(fraction: float) -> str:
    """Whole percents rounded half up (as the results page's script marks the crossover),
    tenths below 1%."""
    value = fraction * 100
    if value >= 1 or value == 0:
        return f"{math.floor(value + 0.5)}%"
    return f"{math.floor(value * 10 + 0.5) / 10}%"
