"""gunicorn's access log with the secrets of each field hidden (webapp.core.redact).

gunicorn writes its access log itself, outside Django's LOGGING and its redaction filter:
`--logger-class webapp.core.access_log.RedactingLogger` (docker-compose.yml, Dockerfile)
redacts the fields before they are formatted, whatever `--access-logformat` says.
"""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from webapp.core.redact import redact

# Fields holding a bare query string (no leading "?"): gunicorn's %(q)s and {query_string}e.
_QUERY_ATOMS = frozenset({"q", "{query_string}e"})


def redact_atom(name: str, value: object) -> object:
    if not isinstance(value, str):
        return value
    if name in _QUERY_ATOMS:
        return redact("?" + value)[1:]
    return redact(value)


class RedactingLogger(Logger):  # type: ignore[misc]
    """gunicorn's logger; access log fields (request line, query, referer, headers) redacted."""

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, object]:
        atoms = super().atoms(resp, req, environ, request_time)
        return {name: redact_atom(name, value) for name, value in atoms.items()}
