"""A seeded percentile bootstrap over groups of measurements.

Why not scipy.stats.bootstrap: the advice's statistics (a crossover, a knee) are found
across several groups at once (a fraction's direct times, its copy times, ...), and some
resamples have no crossover at all, which must be counted at the edge of the measured range
rather than dropped. The resampling is numpy's (a Generator seeded by SEED: the same runs
always give the same interval), and the statistics are vectorised: each takes every
resample's group means at once (one row per group, one column per resample) and returns one
value per resample (NaN where it is undefined), so that a campaign of hundreds of
statements is answered in a fraction of a second.

An interval needs variation to resample: a group of one measurement (one client of one
repetition) resamples to itself, and every resample would give the same value, a
zero-width interval that claims a certainty nobody measured. `interval` then gives None and
the statement says it rests on one measurement (`too_few`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

SEED = 19
RESAMPLES = 1000
# The resamples drawn first: when every one of them gives the same value (a knee, which is a
# client count, mostly does), the interval is that value and the rest are not drawn. Were
# 2.5% of all resamples different, 250 without one would happen with odds of 0.2%.
FIRST = 250
CONFIDENCE = 0.95
# The fewest independent measurements (clients x repetitions) a group needs for an interval.
MIN_SAMPLES = 2

Groups = Sequence[Sequence[float]]
Means = npt.NDArray[np.float64]  # groups x resamples
Statistic = Callable[[Means], Means]  # -> one value per resample, NaN where undefined


def too_few(groups: Groups) -> bool:
    """Whether a group holds fewer than MIN_SAMPLES measurements: no interval then."""
    return not groups or any(len(group) < MIN_SAMPLES for group in groups)


def interval(groups: Groups, statistic: Statistic) -> tuple[float, float] | None:
    """The CONFIDENCE percentile interval of `statistic` of the groups' means over RESAMPLES
    resamples, each group resampled with replacement on its own; None when a group is too
    small (too_few) or the statistic is undefined on more than a tenth of the resamples."""
    if too_few(groups):
        return None
    rng = np.random.default_rng(SEED)
    first = np.asarray(statistic(resampled_means(groups, rng, FIRST)), dtype=float)
    if not np.isnan(first).any() and (first == first[0]).all():
        return float(first[0]), float(first[0])
    # The same generator goes on: the RESAMPLES are those one draw of them all would give.
    rest = np.asarray(statistic(resampled_means(groups, rng, RESAMPLES - FIRST)), dtype=float)
    values = np.concatenate((first, rest))
    values = values[~np.isnan(values)]
    if len(values) < 0.9 * RESAMPLES:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def resampled_means(groups: Groups, rng: np.random.Generator, count: int) -> Means:
    """Each group's mean in each of `count` resamples (groups x resamples), every group
    resampled with replacement on its own, drawn for all groups in one call."""
    sizes = np.array([len(group) for group in groups])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    values = np.concatenate([np.asarray(group, dtype=float) for group in groups])
    # One uniform draw per measurement kept, scaled to an index within its own group.
    draws = rng.random((count, len(values)))
    within = np.minimum(
        (draws * np.repeat(sizes, sizes)).astype(np.int64), np.repeat(sizes, sizes) - 1
    )
    picked = values[within + np.repeat(starts, sizes)]
    sums = np.add.reduceat(picked, starts, axis=1)
    return np.asarray((sums / sizes).T, dtype=float)


def per_column(statistic: Callable[[Sequence[float]], float | None]) -> Statistic:
    """A statistic of one resample's means, applied to each resample (for rules with ties
    and edges numpy does not express; slower, so kept for the rare resamples that need it)."""

    def each(means: Means) -> Means:
        found = (statistic(list(column)) for column in means.T)
        return np.array([np.nan if v is None else v for v in found], dtype=float)

    return each


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values))
