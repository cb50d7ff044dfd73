"""TLS as the engine uses it: always verified, against the run's CA folder (or the system
store), with an X.509 proxy as client certificate where the run presents one."""

from __future__ import annotations

import functools
import re
import ssl

from workers.engine.errors import ErrorClass, ProbeError

# OpenSSL's X509_V_ERR_* codes, in the words an operator acts on.
_VERIFY_REASONS = {
    10: "expired",  # certificate has expired
    9: "not yet valid",
    2: "unknown CA",  # unable to get issuer certificate
    20: "unknown CA",  # unable to get local issuer certificate
    19: "unknown CA",  # self-signed certificate in chain
    18: "unknown CA",  # self-signed certificate
    21: "unknown CA",  # unable to verify the first certificate
    62: "name mismatch",  # hostname mismatch
    64: "name mismatch",  # IP address mismatch
    23: "revoked",
}
# Alerts a server sends when it does not accept the client's certificate.
_REFUSED_OUR_CERTIFICATE = re.compile(
    r"ALERT_(CERTIFICATE_(EXPIRED|REVOKED|UNKNOWN|REQUIRED)|BAD_CERTIFICATE|UNKNOWN_CA|"
    r"ACCESS_DENIED|UNSUPPORTED_CERTIFICATE)",
    re.I,
)


@functools.cache
def ssl_context(ca_dir: str | None, client_cert: str | None = None) -> ssl.SSLContext:
    """One context per CA folder and client certificate in a process: building one costs
    ~20 ms, which must not land in a measured open. Hostnames are always checked."""
    if ca_dir is None:
        context = ssl.create_default_context()
    else:
        context = ssl.create_default_context(capath=ca_dir)
    if client_cert is not None:
        # A proxy file: proxy certificate, its key, then the chain up to the user's.
        context.load_cert_chain(client_cert)
    return context


def verify_reason(error: ssl.SSLCertVerificationError) -> str:
    """ "expired", "unknown CA", "name mismatch", ... with OpenSSL's own words after it."""
    reason = _VERIFY_REASONS.get(error.verify_code or 0, "not verifiable")
    detail = error.verify_message or str(error)
    return f"{reason} ({detail})"


def tls_error(what: str, error: ssl.SSLError) -> ProbeError:
    """The ProbeError of a failed handshake: class tls when the server's certificate does not
    verify, auth when the server refused ours (none, expired, from a CA it does not trust)."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return ProbeError(
            ErrorClass.TLS, f"{what}: server certificate not verifiable: {verify_reason(error)}"
        )
    reason = str(getattr(error, "reason", None) or error)
    if _REFUSED_OUR_CERTIFICATE.search(reason):
        return ProbeError(ErrorClass.AUTH, f"{what}: the server refused our certificate: {reason}")
    return ProbeError(ErrorClass.TLS, f"{what}: TLS handshake failed: {reason}")
