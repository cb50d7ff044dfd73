"""The one error the lab raises: a message a person can act on."""

from __future__ import annotations


class LabError(Exception):
    """The lab cannot do what was asked (bad input, port taken, a server did not start...)."""
