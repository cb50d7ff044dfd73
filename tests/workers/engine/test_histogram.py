"""The latency histogram: bounded error, mergeable, serialisable."""

import random

from workers.engine.histogram import LatencyHistogram, bucket_of, bucket_upper_ns


def test_every_value_falls_inside_its_bucket() -> None:
    values = [0, 1, 15, 16, 17, 31, 32, 999, 10**6, 10**9, 2**40 + 5]
    values += [random.Random(7).randrange(1, 10**10) for _ in range(1000)]
    for value in values:
        bucket = bucket_of(value)
        assert bucket_upper_ns(bucket) >= value
        assert bucket == 0 or bucket_upper_ns(bucket - 1) < value


def test_percentiles_are_within_a_few_percent_of_exact() -> None:
    rng = random.Random(3)
    samples = sorted(int(rng.lognormvariate(12, 1.5)) for _ in range(20000))
    hist = LatencyHistogram()
    for sample in samples:
        hist.record(sample)
    for q in (0.5, 0.9, 0.99):
        exact = samples[round(q * len(samples)) - 1]
        assert abs(hist.percentile_ns(q) - exact) <= 0.04 * exact
    assert hist.max_ns == samples[-1]
    assert hist.percentile_ns(1.0) <= hist.max_ns


def test_merged_histograms_equal_one_histogram_of_all_samples() -> None:
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for i in range(1, 5000):
        (a if i % 3 else b).record(i * 37)
        both.record(i * 37)
    a.merge(b)
    assert a.summary_us() == both.summary_us()
    assert LatencyHistogram.from_json(a.to_json()).summary_us() == both.summary_us()


def test_empty_histogram_reports_zeros() -> None:
    assert LatencyHistogram().summary_us()["p99"] == 0.0
