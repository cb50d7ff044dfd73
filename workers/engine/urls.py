"""What URLs the engine accepts, and how a client gets a connection of its own."""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import unicodedata
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

import idna
from publicsuffixlist import PublicSuffixList

from workers.engine.errors import InvalidParams, OutsideFileRoots
from workers.engine.protocols import FILE, GRIDFTP, HTTP, XROOT, schemes_of

# The schemes of each protocol, as workers/engine/protocols.py declares them.
XROOT_SCHEMES = schemes_of(XROOT)
HTTP_SCHEMES = schemes_of(HTTP)
GRIDFTP_SCHEMES = schemes_of(GRIDFTP)
FILE_SCHEMES = schemes_of(FILE)
SCHEMES = schemes_of()


def check_url(url: str, *, field: str = "url") -> str:
    """Return the URL's scheme, or raise InvalidParams naming what is wrong with it."""
    if not url:
        raise InvalidParams(field, "is empty")
    if url.startswith("-"):
        raise InvalidParams(field, f"{url!r} looks like an option, not a URL")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise InvalidParams(field, f"{url!r} contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        _ = parts.port  # urlsplit checks the port only when asked
    except ValueError as exc:
        raise InvalidParams(field, f"{url!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        allowed = ", ".join(sorted(SCHEMES))
        raise InvalidParams(
            field, f"unknown scheme {parts.scheme!r} in {url!r} (allowed: {allowed})"
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidParams(field, f"file URLs name a local path, not host {parts.netloc!r}")
    elif not parts.hostname:
        raise InvalidParams(field, f"{url!r} has no host")
    else:
        _check_network_parts(url, parts.hostname, parts.port, field)
    if not parts.path or parts.path == "/":
        raise InvalidParams(field, f"{url!r} names no file")
    return scheme


def _check_network_parts(url: str, host: str, port: int | None, field: str) -> None:
    """What a client would pass on as it is, or read as something else: an option for a host,
    port 0, a query string or fragment (XrdCl sends `?authz=...` to the server: a credential
    belongs in the endpoint's credential, which goes only where it may), and a host whose
    labels mix scripts to look like another (`apple` with a Cyrillic first letter, written
    `xn--pple-43d` too)."""
    if host.startswith("-"):
        raise InvalidParams(field, f"host {host!r} starts with '-': a client would read an option")
    if port == 0:
        raise InvalidParams(field, f"{url!r} has port 0: no server listens there")
    if "?" in url or "#" in url:
        raise InvalidParams(
            field,
            f"{url!r} has a query string or fragment: it would be sent to the server as it is "
            "(put a token or key in the endpoint's credential)",
        )
    for label in unicode_host(host, field=field).split("."):
        scripts = _scripts(label)
        if len(scripts - {"LATIN"}) > 1 or (
            len(scripts) > 1 and not any(scripts <= allowed for allowed in _MIXABLE_SCRIPTS)
        ):
            raise InvalidParams(
                field,
                f"host {host!r} mixes scripts in {label!r} ({', '.join(sorted(scripts))}): "
                "it looks like another host",
            )


# Scripts one label may mix (Unicode TS 39, "highly restrictive"): Latin with the scripts
# written together with Han; any other mix is how a look-alike host is made.
_MIXABLE_SCRIPTS = (
    frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "CJK", "BOPOMOFO"}),
    frozenset({"LATIN", "CJK", "HANGUL"}),
)


def _scripts(label: str) -> set[str]:
    """The scripts of a label's letters, by the first word of their Unicode names."""
    scripts = set()
    for char in label:
        if char.isalpha():
            name = unicodedata.name(char, "UNKNOWN")
            scripts.add("HANGUL" if name.startswith("HANGUL") else name.split()[0])
    return scripts


def unicode_host(host: str, *, field: str = "url") -> str:
    """A host name as it reads (its xn-- labels decoded), mapped as IDNA maps it
    (full-width letters, case); an ASCII name without xn-- labels, and an address, as it is."""
    if host.isascii() and "xn--" not in host.lower():
        return host
    try:
        return str(idna.decode(idna.encode(host, uts46=True)))
    except idna.IDNAError as exc:
        raise InvalidParams(
            field, f"host {host!r} is not a valid international name: {exc}"
        ) from None


def ascii_url(url: str) -> str:
    """The URL with an international host written in its ASCII form (xn--, "punycode"), as
    clients connect to it and as it is shown (a look-alike cannot hide); other URLs as they
    are. Call check_url first."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host or host.isascii():
        return url
    ascii_host = idna.encode(host, uts46=True).decode("ascii")
    userinfo = parts.netloc.rpartition("@")[0]
    port = f":{parts.port}" if parts.port is not None else ""
    netloc = f"{userinfo}@{ascii_host}{port}" if userinfo else f"{ascii_host}{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def local_path(url: str) -> str:
    """The path of a file:// URL."""
    return unquote(urlsplit(url).path)


def check_file_roots(url: str, roots: tuple[str, ...] | None, *, field: str = "url") -> None:
    """Refuse file:// URLs outside the allowed roots (after resolving symlinks)."""
    if roots is None:
        return
    real = os.path.realpath(local_path(url))
    for root in roots:
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip("/") + "/"):
            return
    raise OutsideFileRoots(field, f"{url!r} is outside the allowed file roots {list(roots)}")


def with_user(url: str, user: str) -> str:
    """root://host//f -> root://USER@host//f: XrdCl shares one connection per host+user."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def host_of(url: str) -> str:
    """host:port of a URL, without user info."""
    return normalize_server(urlsplit(url).netloc.rsplit("@", 1)[-1])


def normalize_server(server: str) -> str:
    """XRootD writes IPv4-mapped addresses as [::127.0.0.1]:1094: say 127.0.0.1:1094."""
    for prefix in ("[::ffff:", "[::"):
        if server.startswith(prefix) and "]" in server:
            address, _, rest = server[len(prefix) :].partition("]")
            if address.count(".") == 3:
                return address + rest
    return server


_HOST_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@functools.cache
def _public_suffixes() -> PublicSuffixList:
    """The public suffix list the package bundles (read once; nothing is fetched)."""
    return PublicSuffixList()


def check_credential_hosts(
    hosts: Sequence[str], *, field: str = "credential_hosts"
) -> tuple[str, ...]:
    """The hosts an endpoint's credential may also go to (a redirection's target), checked
    and written as they are matched: a host name or address as it is (`pool7.example.org`),
    or a domain suffix with a leading dot for every name under it (`.example.org`), never a
    public suffix (`.ac.uk`, `.org`, `.github.io`: the Public Suffix List's, bundled with the
    publicsuffixlist package), where anyone may register a name. InvalidParams naming
    `field` otherwise."""
    checked = []
    for entry in hosts:
        text = entry.strip()
        suffix = text.startswith(".")
        name = text[1:] if suffix else text
        try:
            ascii_name = idna.encode(name, uts46=True).decode("ascii") if name else ""
        except idna.IDNAError:
            ascii_name = ""
        if _is_address(name) and not suffix:
            checked.append(name.strip("[]").lower())
            continue
        labels = ascii_name.split(".") if ascii_name else []
        if not labels or not all(_HOST_LABEL.match(label) for label in labels):
            raise InvalidParams(
                field,
                f"{entry!r} is not a host name, an address or a domain suffix (.example.org)",
            )
        if suffix and _public_suffixes().privatesuffix(ascii_name) is None:
            raise InvalidParams(
                field,
                f"{entry!r} is a public suffix: anyone may register a name under it "
                "(give the site's own domain, .example.org, or its hosts)",
            )
        checked.append(("." if suffix else "") + ascii_name)
    return tuple(dict.fromkeys(checked))


def host_listed(host: str, hosts: Sequence[str]) -> bool:
    """Whether `host` is one of `hosts` (as check_credential_hosts wrote them): the same
    name or address, or a name under a listed `.suffix`."""
    host = host.strip("[]").lower()
    for entry in hosts:
        if entry.startswith("."):
            if host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
