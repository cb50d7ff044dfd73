"""The API fuzzer's third part of the operations (test_api_fuzz.py has the first and says
what is fuzzed): a file of its own, so that bin/test's stages fuzz the parts at once."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.webapp.api.test_api_fuzz import PARTS, fuzz_operations

assert PARTS == 3  # one file a part


@pytest.mark.sqlite
def test_fuzzing_every_operation_of_the_third_part_finds_no_server_error_nor_schema_drift(
    live_server: Any,
    seeded: tuple[User, dict[str, int]],
    unthrottled: None,
    no_measurements: None,
) -> None:
    fuzz_operations(live_server.url, seeded, part=2)
