"""Reading a registry's document from a file or a URL (docs/topology.md).

A URL is fetched only where the egress policy lets workers connect (workers.engine.egress),
through the engine's guarded HTTP client, as webhooks are: the host is resolved, every
address checked, and the connection made to a checked address. TLS is verified against
FEDPROBE_CA_DIR; an X.509 client certificate (GOCDB's protected methods need one) is
presented when given. Redirects are not followed; answers are capped in size."""

from __future__ import annotations

import ssl
from pathlib import Path
from urllib.parse import urljoin

import httpx
from django.conf import settings

from webapp.sites.registry_formats import RegistryRefused
from workers.engine.credentials import resolve_ca_dir
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ProbeError
from workers.engine.httpclient import ClientConfig

# GOCDB's full get_service_endpoint answer is ~10 MB; nothing a registry sends is larger.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# A paged GOCDB answer is followed for at most this many pages.
MAX_PAGES = 100


def is_url(where: str) -> bool:
    return where.lower().startswith(("http://", "https://"))


def document_read(where: str, *, client_cert: str = "", client_key: str = "") -> bytes:
    """The bytes of the file or URL `where` (RegistryRefused says why not, naming it)."""
    if is_url(where):
        return _fetch(where, client_cert=client_cert, client_key=client_key)
    if "://" in where:
        raise RegistryRefused(where, "FILE_OR_URL", "give a file or an http(s):// URL")
    path = Path(where)
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise RegistryRefused(where, "FILE_OR_URL", f"larger than {MAX_DOCUMENT_BYTES} bytes")
        return path.read_bytes()
    except OSError as exc:
        raise RegistryRefused(where, "FILE_OR_URL", f"cannot read it: {exc.strerror}") from None


def next_url(where: str, href: str) -> str:
    """A paged answer's next link (GOCDB gives it relative to its own host)."""
    return urljoin(where, href)


def _fetch(url: str, *, client_cert: str, client_key: str) -> bytes:
    egress = EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW)
    context = _tls(client_cert, client_key)
    config = ClientConfig(egress, context, None)
    timeout = settings.FEDPROBE_REGISTRY_TIMEOUT_S
    try:
        with config.client() as client, client.stream("GET", url, timeout=timeout) as response:
            _judge(url, response)
            return _body(url, response)
    except ProbeError as exc:
        raise RegistryRefused(url, "FILE_OR_URL", exc.message) from None
    except httpx.TimeoutException:
        raise RegistryRefused(url, "FILE_OR_URL", f"no answer within {timeout} s") from None
    except httpx.HTTPError as exc:
        raise RegistryRefused(
            url, "FILE_OR_URL", f"cannot fetch it: {type(exc).__name__}: {exc}"
        ) from None


def _tls(client_cert: str, client_key: str) -> ssl.SSLContext:
    ca_dir = resolve_ca_dir(settings.FEDPROBE_CA_DIR)
    context = ssl.create_default_context(capath=ca_dir) if ca_dir else ssl.create_default_context()
    if client_cert:
        try:
            context.load_cert_chain(client_cert, client_key or None)
        except (OSError, ssl.SSLError) as exc:
            # Neither the files' contents nor their paths are shown.
            raise RegistryRefused(
                "client certificate", "--cert", f"cannot load it ({type(exc).__name__})"
            ) from None
    return context


def _judge(url: str, response: httpx.Response) -> None:
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("location", "?")
        raise RegistryRefused(
            url, "FILE_OR_URL", f"redirected ({status}) to {where}: give that URL"
        )
    if status != 200:
        raise RegistryRefused(url, "FILE_OR_URL", f"the server answered {status}")


def _body(url: str, response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_DOCUMENT_BYTES:
            raise RegistryRefused(url, "FILE_OR_URL", f"larger than {MAX_DOCUMENT_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
