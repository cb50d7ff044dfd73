"""A new test file's size and adler32, asked of the storage server instead of typed.

The lookup runs in the web process, as Test connection does (services.
endpoint_test_connection): with the endpoint's credential, this host's egress policy, CA
folder and file roots (Endpoint.engine_params), in a child process of the engine's, within
LOOKUP_TIMEOUT_S. A value the operator typed is checked against the server's: a wrong size
or adler32 would make every run of the file fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from webapp.sites.models import Endpoint
from workers.engine import InvalidParams, ProbeError, RunParams
from workers.engine.backends.base import FileFacts
from workers.engine.facts import file_facts

# The key of an error that is not about one field (TestFileFill.errors).
NOT_A_FIELD = ""
ADLER32_HEX = re.compile(r"[0-9a-f]{8}")
# A stat, and a checksum the server may compute on demand (XRootD reads the file once).
LOOKUP_TIMEOUT_S = 20


@dataclass(frozen=True)
class TestFileFill:
    """A test file's size and adler32 once the server was asked, what it said and where, and
    the fields it contradicts or could not fill (by field name)."""

    __test__ = False  # not a pytest test class

    size: int | None
    adler32: str
    facts: FileFacts
    errors: dict[str, str] = field(default_factory=dict)
    typed_size: bool = False
    typed_adler32: bool = False

    def found(self) -> dict[str, dict[str, object]]:
        """Each value and where it came from (the API's `found`)."""
        return {
            "size": {"value": self.size, "origin": self._size_from()},
            "adler32": {"value": self.adler32 or None, "origin": self._adler32_from()},
        }

    def summary(self) -> str:
        """One sentence for the page: what was found, from where, and what was not."""
        if self.size is None:
            size = f"no size ({self.facts.size_from})"
        else:
            size = f"size {self.size} {self._size_from()}"
        if self.adler32:
            return f"{size}; adler32 {self.adler32} {self._adler32_from()}"
        return f"{size}; no adler32 ({self.facts.adler32_from}): runs will not verify the bytes"

    def _size_from(self) -> str:
        return _origin(self.typed_size, self.facts.size, self.facts.size_from)

    def _adler32_from(self) -> str:
        return _origin(self.typed_adler32, self.facts.adler32, self.facts.adler32_from)


def _origin(typed: bool, server_value: object, server_said: str) -> str:
    if not typed:
        return f"from {server_said}"
    if server_value is None:
        return f"as typed (not checked: {server_said})"
    return f"as typed, confirmed by {server_said}"


def endpoint_file_facts(*, endpoint: Endpoint, path: str) -> FileFacts:
    """What the endpoint's server says of `path` (file_facts, with this host's rules).

    Raises InvalidParams for a path a run would refuse (outside the file roots)."""
    url = endpoint.file_url(path)
    try:
        params = endpoint.engine_params(RunParams(urls=(url,), timeout_s=LOOKUP_TIMEOUT_S))
    except ProbeError as exc:
        return _not_asked(f"the endpoint's credential gave no token: {exc.message}")
    except InvalidParams as exc:
        return _not_asked(f"the endpoint's credential: {exc}")
    return file_facts(params)


def endpoint_file_fill(
    *, endpoint: Endpoint, path: str, size: int | None, adler32: str
) -> TestFileFill:
    """Fill a blank size or adler32 from the server; a typed one must agree with it. A size
    the server cannot give must be typed; an adler32 it cannot give stays blank."""
    try:
        facts = endpoint_file_facts(endpoint=endpoint, path=path)
    except InvalidParams as exc:  # the path (outside the file roots), or the credential
        where = "path" if exc.field in ("url", "path") else NOT_A_FIELD
        return TestFileFill(size, adler32, _not_asked(str(exc)), {where: str(exc)})
    errors: dict[str, str] = {}
    typed_adler32 = adler32.lower()
    if size is None and facts.size is None:
        errors["size"] = f"the server did not say ({facts.size_from}); type it"
    elif size is not None and facts.size is not None and size != facts.size:
        errors["size"] = (
            f"the server says {facts.size} bytes ({facts.size_from}), not {size}: "
            "correct it or leave it blank"
        )
    if typed_adler32 and facts.adler32 is not None and typed_adler32 != facts.adler32:
        errors["adler32"] = (
            f"the server says {facts.adler32} ({facts.adler32_from}), not {typed_adler32}: "
            "every run would fail its checksum; correct it or leave it blank"
        )
    return TestFileFill(
        size=facts.size if size is None else size,
        adler32=typed_adler32 or facts.adler32 or "",
        facts=facts,
        errors=errors,
        typed_size=size is not None,
        typed_adler32=bool(typed_adler32),
    )


def _not_asked(why: str) -> FileFacts:
    return FileFacts(None, f"not asked: {why}", None, f"not asked: {why}")
