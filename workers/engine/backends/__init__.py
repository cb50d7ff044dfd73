"""Protocol backends, imported only when a URL of their scheme is used.

Keeping the imports lazy means a file:// run never loads XRootD or httpx.
"""

from __future__ import annotations

from workers.engine.backends.base import Backend
from workers.engine.urls import FILE_SCHEMES, GRIDFTP_SCHEMES, HTTP_SCHEMES, XROOT_SCHEMES


def backend_for(scheme: str) -> Backend:
    """A fresh backend for `scheme` (one per client process)."""
    if scheme in XROOT_SCHEMES:
        from workers.engine.backends.xroot import XRootDBackend

        return XRootDBackend()
    if scheme in HTTP_SCHEMES:
        from workers.engine.backends.http import HttpBackend

        return HttpBackend()
    if scheme in GRIDFTP_SCHEMES:
        from workers.engine.backends.gridftp import GridFtpBackend

        return GridFtpBackend()
    if scheme in FILE_SCHEMES:
        from workers.engine.backends.local import LocalBackend

        return LocalBackend()
    raise ValueError(f"no backend for scheme {scheme!r}")
