"""The lab federation: real servers on loopback behind relays that emulate WAN links.

`Lab` starts and stops them (workers/lab/lab.py); ports.py documents the port block. The
names below are imported on first use, so that `python -m workers.lab.relay` (a process of
the lab) does not load the whole package before running.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.lab.endpoints import LabEndpoint
    from workers.lab.errors import LabError
    from workers.lab.files import LabFile, parse_size
    from workers.lab.issuer import LAB_AUDIENCE
    from workers.lab.lab import Lab
    from workers.lab.profiles import PROFILES, Profile

__all__ = [
    "LAB_AUDIENCE",
    "PROFILES",
    "Lab",
    "LabEndpoint",
    "LabError",
    "LabFile",
    "Profile",
    "parse_size",
]

_HOMES = {
    "PROFILES": "workers.lab.profiles",
    "Profile": "workers.lab.profiles",
    "Lab": "workers.lab.lab",
    "LabEndpoint": "workers.lab.endpoints",
    "LabError": "workers.lab.errors",
    "LabFile": "workers.lab.files",
    "parse_size": "workers.lab.files",
    "LAB_AUDIENCE": "workers.lab.issuer",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
