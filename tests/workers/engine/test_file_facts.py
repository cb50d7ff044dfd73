"""A file's size and adler32 asked of the lab's real servers (file_facts), not typed."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.workers.engine.conftest import FILE_4M, lab_file
from workers.engine import EgressPolicy, InvalidParams, RunParams
from workers.engine.backends.digests import adler32_from_headers
from workers.engine.credentials import Credential
from workers.engine.facts import file_facts

TIMEOUT_S = 10.0


def facts(url: str, **params: Any) -> Any:
    return file_facts(RunParams(urls=(url,), timeout_s=TIMEOUT_S, **params))


def adler32_on_disk(path: Path) -> str:
    return f"{zlib.adler32(path.read_bytes()):08x}"


def test_xrootd_gives_the_size_by_stat_and_the_adler32_by_checksum_query(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    found = facts(url)
    on_disk = lab.data_dir("local") / FILE_4M.lstrip("/")
    assert (found.size, found.adler32) == (on_disk.stat().st_size, adler32_on_disk(on_disk))
    assert (found.size_from, found.adler32_from) == ("XRootD stat", "XRootD checksum query")


def test_a_redirector_passes_the_checksum_query_to_the_data_server(lab: Any) -> None:
    url, info = lab_file(lab, "redirector-root", "/fed/a-4M")
    found = facts(url)
    assert (found.size, found.adler32) == (info.size, info.adler32)


def test_xrdhttp_answers_want_digest_with_a_digest_header(lab: Any) -> None:
    url, info = lab_file(lab, "near-http", FILE_4M)
    found = facts(url)
    assert (found.size, found.adler32) == (info.size, info.adler32)
    assert found.adler32_from == "the Digest header of HEAD"


def test_a_token_door_answers_over_https_with_the_token(lab: Any) -> None:
    url, info = lab_file(lab, "local-https", FILE_4M)
    token = Credential.token(lab.mint_token())
    found = facts(url, credential=token, ca_dir=str(lab.ca_dir()))
    assert (found.size, found.adler32) == (info.size, info.adler32)
    refused = facts(url, ca_dir=str(lab.ca_dir()))
    assert refused.size is None and refused.adler32 is None
    assert refused.size_from.startswith("stat failed: [auth]")
    assert "403" in refused.size_from


def test_a_cache_without_checksums_gives_the_size_and_says_why_not_the_adler32(lab: Any) -> None:
    url, info = lab_file(lab, "xcache-root", FILE_4M)
    found = facts(url)
    assert (found.size, found.adler32) == (info.size, None)
    assert "[3013] query chksum is not supported" in found.adler32_from


def test_a_local_file_is_read_for_its_adler32_within_the_file_roots(lab: Any) -> None:
    url, _ = lab_file(lab, "local-file", FILE_4M)
    on_disk = lab.data_dir("local") / FILE_4M.lstrip("/")
    found = facts(url, file_roots=(str(lab.data_dir("local")),))
    assert (found.size, found.adler32) == (on_disk.stat().st_size, adler32_on_disk(on_disk))
    assert found.adler32_from == "reading the file (zlib.adler32)"
    with pytest.raises(InvalidParams, match="url"):
        facts(url, file_roots=("/nowhere",))


def test_gridftp_gives_the_size_and_says_it_gives_no_checksum(lab: Any) -> None:
    url, info = lab_file(lab, "local-ftp", FILE_4M)
    found = facts(url)
    assert (found.size, found.adler32) == (info.size, None)
    assert "GridFTP gives no checksum" in found.adler32_from


@pytest.mark.parametrize("endpoint", ["local-root", "local-http"])
def test_a_missing_file_has_no_size_and_says_so(lab: Any, endpoint: str) -> None:
    found = facts(lab.endpoint(endpoint).file_url("/fedprobe/no-such-file"))
    assert (found.size, found.adler32) == (None, None)
    assert found.size_from.startswith("stat failed: [not-found]")


def test_the_egress_policy_holds_the_lookup(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    found = facts(url, egress=EgressPolicy.allowing(["192.0.2.0/24"]))
    assert found.size is None
    assert found.size_from.startswith("stat failed: [egress]")


@pytest.mark.parametrize(
    ("headers", "adler32", "origin"),
    [
        ({"Digest": "adler32=9f190ea2"}, "9f190ea2", "the Digest header of HEAD"),
        ({"Digest": "MD5=HUXZLQLMuI/KZ5KDcJPcOA==, ADLER32=0a1B2c"}, "000a1b2c", "Digest"),
        # RFC 9530: the checksum's 4 bytes as a structured-field byte sequence.
        ({"Repr-Digest": "sha-256=:X48E9q==:, adler=:nxkOog==:"}, "9f190ea2", "Repr-Digest"),
        ({"Repr-Digest": "sha-256=:X48E9q==:"}, None, "sha-256 (Repr-Digest), no adler32"),
        ({}, None, "no Digest or Repr-Digest header"),
    ],
)
def test_digest_headers_of_both_rfcs_give_the_adler32(
    headers: dict[str, str], adler32: str | None, origin: str
) -> None:
    found, said = adler32_from_headers(httpx.Headers(headers))
    assert found == adler32
    assert origin in said
