"""A file's adler32 from an HTTP answer's digest headers, as the server computed it.

Asked with both generations of the headers: `Want-Digest: adler32` (RFC 3230; the answer is
`Digest: adler32=1a2b3c4d`, hexadecimal, what XrdHttp and dCache send) and
`Want-Repr-Digest: adler=3` (RFC 9530; the answer is `Repr-Digest: adler=:GrA8TQ==:`, the
checksum's 4 bytes in base64 inside a structured-field byte sequence).
"""

from __future__ import annotations

import base64
import binascii
import re

from httpx import Headers

# Sent with the HEAD that stats the file.
WANT_DIGEST = {"Want-Digest": "adler32", "Want-Repr-Digest": "adler=3"}
ASKED = "Want-Digest: adler32 and Want-Repr-Digest: adler"
_HEX32 = re.compile(r"[0-9a-fA-F]{1,8}")
_BYTE_SEQUENCE = re.compile(r":([A-Za-z0-9+/=]*):")


def adler32_from_headers(headers: Headers) -> tuple[str | None, str]:
    """(adler32 in 8 lowercase hex digits, where it came from), or None and why not."""
    offered: list[str] = []
    for name, parse in (("Repr-Digest", _repr_digest), ("Digest", _digest)):
        members = _members(headers.get_list(name, split_commas=True))
        offered += [f"{algorithm} ({name})" for algorithm in members]
        value = parse(members)
        if value is not None:
            return value, f"the {name} header of HEAD"
    if offered:
        return None, f"the server offers {', '.join(offered)}, no adler32"
    return None, f"no Digest or Repr-Digest header in the answer to HEAD with {ASKED}"


def _members(fields: list[str]) -> dict[str, str]:
    """`alg=value` members by lowercase algorithm (both headers are comma-separated lists)."""
    members = {}
    for field in fields:
        algorithm, _, value = field.strip().partition("=")
        if algorithm:
            members[algorithm.strip().lower()] = value.strip()
    return members


def _digest(members: dict[str, str]) -> str | None:
    value = members.get("adler32")
    if value is None or not _HEX32.fullmatch(value):
        return None
    return f"{int(value, 16):08x}"


def _repr_digest(members: dict[str, str]) -> str | None:
    match = _BYTE_SEQUENCE.fullmatch(members.get("adler", ""))
    if match is None:
        return None
    try:
        raw = base64.b64decode(match.group(1), validate=True)
    except binascii.Error:
        return None
    return raw.hex() if len(raw) == 4 else None
