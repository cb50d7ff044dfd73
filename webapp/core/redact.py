"""Secrets out of log lines: passwords in URLs, tokens in query strings and headers, PEM blocks.

`redact(text)` for any message that may carry an endpoint URL or a server's answer;
`RedactSecretsFilter` applies it to every record of the handlers in settings.LOGGING
(runserver's access log, the django.server logger, included); gunicorn's access log is
redacted by webapp.core.access_log.
Plain Python: the workers use it too.
"""

from __future__ import annotations

import logging
import re

HIDDEN = "[redacted]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL),
        f"{HIDDEN} PEM block",
    ),
    # scheme://user:password@host
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@"), rf"\1{HIDDEN}@"),
    # ?authz=... (XRootD), access_token=... (WLCG tokens over HTTP), presigned URLs: any
    # parameter named like a secret, or ending so after "_", "-" or "." (client_secret,
    # refresh_token, X-Amz-Signature, api_key)
    (
        re.compile(
            r"(?i)([?&](?:[\w.~-]*[_.-])?(?:authz|token|password|passwd|pwd|secret|"
            r"signature|sig|key|apikey|credential)=)[^&#\s'\"]+"
        ),
        rf"\1{HIDDEN}",
    ),
    # The single sign-on's answer (/accounts/oidc/callback/?code=...&state=...): the code is
    # exchanged for the user's tokens, the state binds it to their session.
    (re.compile(r"([?&](?:code|state)=)[^&#\s'\"]+"), rf"\1{HIDDEN}"),
    # Authorization: Bearer ... / Token ...
    (re.compile(r"(?i)\b(bearer|token)(\s+)[A-Za-z0-9._~+/=-]{16,}"), rf"\1\2{HIDDEN}"),
    (
        re.compile(r"(?i)\b(password|passwd|secret|credential)(\s*[=:]\s*)[^\s,;]+"),
        rf"\1\2{HIDDEN}",
    ),
)


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecretsFilter(logging.Filter):
    """Rewrites a record's message and traceback with the secrets in them hidden."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = redact(message)
        if hidden != message:
            record.msg, record.args = hidden, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
