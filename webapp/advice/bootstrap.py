"""A seeded percentile bootstrap over groups of measurements.

Why not scipy.stats.bootstrap: the advice's statistics (a crossover, a knee) are found
across several groups at once (a fraction's direct times, its copy times, ...), a group
may hold a single measurement (one run of one client), and some resamples have no
crossover at all, which must be counted at the edge of the measured range rather than
dropped. scipy refuses samples of one and drops nothing. The resampling itself is numpy's
(a Generator seeded by SEED: the same runs always give the same interval).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

SEED = 19
RESAMPLES = 1000
CONFIDENCE = 0.95

Groups = Sequence[Sequence[float]]


def interval(
    groups: Groups, statistic: Callable[[Sequence[float]], float | None]
) -> tuple[float, float] | None:
    """The CONFIDENCE percentile interval of `statistic` of the groups' means over RESAMPLES
    resamples, each group resampled with replacement on its own; None when the statistic
    is undefined on more than a tenth of them."""
    rng = np.random.default_rng(SEED)
    arrays = [np.asarray(group, dtype=float) for group in groups]
    if not arrays or any(len(a) == 0 for a in arrays):
        return None
    # One row of RESAMPLES means per group, drawn in one call each.
    means = np.array(
        [a[rng.integers(0, len(a), size=(RESAMPLES, len(a)))].mean(axis=1) for a in arrays]
    )
    values = [v for v in (statistic(list(column)) for column in means.T) if v is not None]
    if len(values) < 0.9 * RESAMPLES:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values))
