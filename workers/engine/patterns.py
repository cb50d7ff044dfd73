"""Which (offset, size) requests a client sends for each access pattern.

Plans are made before the clients are released, so generating them is never timed.
Random offsets are distinct read_size-aligned blocks drawn without replacement from a
generator seeded by (seed, client, file): reproducible, and never a duplicate chunk.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from workers.engine.params import Pattern, needed_bytes

Request = tuple[int, int]


def plan_requests(
    pattern: Pattern,
    *,
    file_size: int,
    read_size: int,
    fraction: float,
    skip: int = 0,
    seed: int | str = 1,
) -> list[Request]:
    """The requests one client sends to read `fraction` of a file of `file_size` bytes."""
    needed = needed_bytes(fraction, file_size)
    if pattern == Pattern.SEQUENTIAL:
        return _blocks(range(0, needed, read_size), file_size, read_size, needed)
    if pattern == Pattern.SKIP:
        stride = read_size * (skip + 1)
        count = math.ceil(needed / read_size)
        return _blocks(range(0, file_size, stride)[:count], file_size, read_size, needed)
    return _random_blocks(file_size, read_size, needed, seed)


def _blocks(offsets: range, file_size: int, read_size: int, needed: int) -> list[Request]:
    requests = [(offset, min(read_size, file_size - offset)) for offset in offsets]
    return _trim_to(requests, needed)


def _random_blocks(file_size: int, read_size: int, needed: int, seed: int | str) -> list[Request]:
    n_blocks = math.ceil(file_size / read_size)
    count = min(n_blocks, math.ceil(needed / read_size))
    rng = random.Random(str(seed))
    chosen = rng.sample(range(n_blocks), count)
    requests = [(b * read_size, min(read_size, file_size - b * read_size)) for b in chosen]
    return _trim_to(requests, needed)


def _trim_to(requests: list[Request], needed: int) -> list[Request]:
    """Shorten the last request so the plan asks for exactly `needed` bytes when it can."""
    total = sum(size for _, size in requests)
    if requests and total > needed:
        offset, size = requests[-1]
        excess = total - needed
        if excess < size:
            requests[-1] = (offset, size - excess)
    return requests


def client_seed(seed: int, client: int, file_index: int) -> str:
    """Each client and file gets its own reproducible random stream."""
    return f"{seed}:{client}:{file_index}"


def vector_batches(
    requests: Sequence[Request], vector_size: int, max_chunks: int, max_chunk_bytes: int
) -> list[list[Request]]:
    """Group requests into vectored reads the server accepts: at most min(vector_size,
    max_chunks) chunks each, no chunk above max_chunk_bytes, no chunk twice in one read
    (XRootD answers a readv holding the same chunk twice with "Invalid response").
    A repeated chunk starts the next read instead."""
    chunks: list[Request] = []
    for offset, size in requests:
        for start in range(offset, offset + size, max_chunk_bytes):
            chunks.append((start, min(max_chunk_bytes, offset + size - start)))
    per_batch = max(1, min(vector_size, max_chunks))
    batches: list[list[Request]] = []
    batch: list[Request] = []
    seen: set[Request] = set()
    for chunk in chunks:
        if len(batch) == per_batch or chunk in seen:
            batches.append(batch)
            batch, seen = [], set()
        batch.append(chunk)
        seen.add(chunk)
    if batch:
        batches.append(batch)
    return batches
