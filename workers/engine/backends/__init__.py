"""Protocol backends, imported only when a URL of their scheme is used.

Keeping the imports lazy means a file:// run never loads XRootD or httpx: each protocol's
declaration (workers/engine/protocols.py) imports its backend when asked.
"""

from __future__ import annotations

from workers.engine.backends.base import Backend
from workers.engine.protocols import protocol_of


def backend_for(scheme: str) -> Backend:
    """A fresh backend for `scheme` (one per client process)."""
    try:
        protocol = protocol_of(scheme)
    except ValueError:
        raise ValueError(f"no backend for scheme {scheme!r}") from None
    return protocol.backend()()
