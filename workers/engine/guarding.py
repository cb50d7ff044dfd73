"""What the egress guard holds a process to: the run's and the cleanup's (egress_guard.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

from workers.engine.credential_scope import AddressScope, CredentialScope
from workers.engine.credentials import Access, AuthMethod, run_secrets
from workers.engine.egress import EgressPolicy
from workers.engine.egress_guard import EgressGuard
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


@contextlib.contextmanager
def guarded_secrets(params: RunParams) -> Iterator[tuple[Access, EgressGuard | None]]:
    """The credential of `params` in a private folder (run_secrets), held by the egress
    guard (guarded) for as long as the block lasts. The run, a file's facts and a cleanup
    share it."""
    with (
        run_secrets(params.credential, scheme=params.scheme, ca_dir=params.ca_dir) as access,
        guarded(params, access) as held,
    ):
        yield held


@contextlib.contextmanager
def guarded(params: RunParams, access: Access) -> Iterator[tuple[Access, EgressGuard | None]]:
    """The egress guard that holds the processes using `access` to what `params` allows
    (guarded_by), for as long as the block lasts: the Access a child process gets (the
    guard's link and the credential_hosts with it), and the guard, to explain a refusal."""
    with EgressGuard.running(*guarded_by(params, params.scheme, access.auth)) as guard:
        link = None if guard is None else guard.link
        yield replace(access, guard=link, credential_hosts=params.credential_hosts), guard
