"""Read plans: the bytes each pattern asks for, reproducibly, never a chunk twice."""

import itertools
import math

import pytest

from workers.engine.params import Pattern
from workers.engine.patterns import client_seed, plan_requests, vector_batches

MiB = 1024 * 1024


def total(plan: list[tuple[int, int]]) -> int:
    return sum(size for _, size in plan)


@pytest.mark.parametrize("pattern", [Pattern.SEQUENTIAL, Pattern.RANDOM, Pattern.VECTOR])
@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.5, 1.0])
def test_plan_requests_exactly_the_fraction_of_the_file(pattern: Pattern, fraction: float) -> None:
    size = 16 * MiB + 123
    plan = plan_requests(pattern, file_size=size, read_size=4096, fraction=fraction, seed="s")
    assert total(plan) == math.ceil(fraction * size)
    assert all(offset >= 0 and offset + n <= size for offset, n in plan)


def test_sequential_plan_starts_at_zero_and_is_contiguous() -> None:
    plan = plan_requests(Pattern.SEQUENTIAL, file_size=MiB, read_size=1000, fraction=0.5)
    assert plan[0][0] == 0
    assert all(a[0] + a[1] == b[0] for a, b in itertools.pairwise(plan))


def test_random_plan_is_reproducible_per_seed_and_differs_between_clients() -> None:
    def make(seed: str) -> list[tuple[int, int]]:
        return plan_requests(
            Pattern.RANDOM, file_size=64 * MiB, read_size=4096, fraction=0.1, seed=seed
        )

    assert make(client_seed(1, 0, 0)) == make(client_seed(1, 0, 0))
    assert make(client_seed(1, 0, 0)) != make(client_seed(1, 1, 0))
    assert make(client_seed(1, 0, 0)) != make(client_seed(2, 0, 0))


def test_random_plan_never_reads_a_block_twice() -> None:
    plan = plan_requests(Pattern.RANDOM, file_size=MiB, read_size=4096, fraction=1.0, seed="x")
    offsets = [offset for offset, _ in plan]
    assert len(offsets) == len(set(offsets)) == MiB // 4096


def test_skip_plan_reads_one_block_then_skips_m() -> None:
    plan = plan_requests(Pattern.SKIP, file_size=MiB, read_size=4096, fraction=1.0, skip=3)
    assert [offset for offset, _ in plan[:3]] == [0, 4 * 4096, 8 * 4096]
    assert total(plan) == MiB // 4  # until EOF: a quarter of the blocks


def test_skip_plan_stops_at_the_fraction() -> None:
    plan = plan_requests(Pattern.SKIP, file_size=MiB, read_size=4096, fraction=0.1, skip=1)
    assert total(plan) == -(-MiB // 10)


def test_vector_batches_respect_server_limits_and_hold_no_duplicates() -> None:
    requests = [(0, 10), (100, 10), (0, 10), (200, 5000), (300, 10)]
    batches = vector_batches(requests, vector_size=3, max_chunks=2, max_chunk_bytes=2048)
    assert all(len(batch) <= 2 for batch in batches)
    assert all(size <= 2048 for batch in batches for _, size in batch)
    assert all(len(batch) == len(set(batch)) for batch in batches)
    assert sum(size for batch in batches for _, size in batch) == 10 + 10 + 10 + 5000 + 10


def test_vector_batches_use_the_requested_vector_size_under_the_limit() -> None:
    requests = [(i * 100, 10) for i in range(10)]
    assert [len(b) for b in vector_batches(requests, 4, 1024, 2**20)] == [4, 4, 2]
