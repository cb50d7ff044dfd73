"""The one error the lab raises: a message a person can act on."""

from __future__ import annotations


class LabError(Exception):
    """The lab cannot do what was asked (bad input, port taken, a server did not start...)."""


class PortTaken(LabError):
    """A port of the lab's block is in use: another base port may do."""
