"""What URLs the engine accepts, and how a client gets a connection of its own."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit, urlunsplit

from workers.engine.errors import InvalidParams, OutsideFileRoots

XROOT_SCHEMES = frozenset({"root", "roots", "xroot", "xroots"})
HTTP_SCHEMES = frozenset({"http", "https", "davs"})
GRIDFTP_SCHEMES = frozenset({"gsiftp", "ftp"})
FILE_SCHEMES = frozenset({"file"})
SCHEMES = XROOT_SCHEMES | HTTP_SCHEMES | GRIDFTP_SCHEMES | FILE_SCHEMES


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
    if not parts.path or parts.path == "/":
        raise InvalidParams(field, f"{url!r} names no file")
    return scheme


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
