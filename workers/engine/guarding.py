"""What the egress guard holds a process to: the run's and the cleanup's (egress_guard.py)."""

from __future__ import annotations

from workers.engine.credential_scope import AddressScope, CredentialScope
from workers.engine.credentials import AuthMethod
from workers.engine.egress import EgressPolicy
from workers.engine.params import RunParams
from workers.engine.protocols import protocol_of


def guarded_by(
    params: RunParams, scheme: str, auth: AuthMethod
) -> tuple[EgressPolicy | None, AddressScope | None]:
    """What the egress guard holds the run's processes to, if they need it: the egress
    policy, and where the credential may go (credential_scope.py). Only for protocols whose
    libraries connect on their own; the HTTP backend checks both itself."""
    protocol = protocol_of(scheme)
    if not protocol.connects_itself:
        return None, None
    scope = None
    if auth != AuthMethod.NONE:
        scope = AddressScope(
            CredentialScope.of(
                params.urls, params.credential_hosts, any_port=protocol.credential_any_port
            )
        )
    return params.egress, scope
