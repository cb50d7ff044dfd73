"""The protocol declarations (workers/engine/protocols.py) are what the engine goes by: every
declared scheme is accepted and reaches its protocol's backend, an operation a protocol does
not support is refused naming `operation`, and credentials go where the schemes say."""

from typing import Any

import pytest

from workers.engine.backends import backend_for
from workers.engine.credential_scope import CredentialScope
from workers.engine.credentials import AuthMethod, Credential, CredentialKind
from workers.engine.errors import InvalidParams
from workers.engine.params import TPC_OPERATIONS, Method, Operation, RunParams
from workers.engine.protocols import DEFAULT_PORTS, PROTOCOLS, SCHEMES, Protocol, protocol_of
from workers.engine.urls import check_url

DECLARED = [(protocol, scheme.name) for protocol in PROTOCOLS for scheme in protocol.schemes]
UNSUPPORTED = [
    (protocol, operation)
    for protocol in PROTOCOLS
    for operation in Operation
    if operation not in protocol.operations
]


def url_of(scheme: str) -> str:
    if scheme == "file":
        return "file:///srv/data/file"
    return f"{scheme}://storage.example.org//data/file"


def ids(value: object) -> str:
    return value.name if isinstance(value, Protocol) else str(value)


@pytest.mark.parametrize(("protocol", "scheme"), DECLARED, ids=ids)
def test_every_declared_scheme_is_accepted_and_reaches_its_protocols_backend(
    protocol: Protocol, scheme: str
) -> None:
    url = url_of(scheme)
    assert check_url(url) == scheme
    assert check_url(url.replace(scheme, scheme.upper(), 1)) == scheme
    assert type(backend_for(scheme)) is protocol.backend()
    assert protocol_of(scheme.upper()) is protocol
    assert RunParams(urls=(url,), method=Method.COPY).scheme == scheme


@pytest.mark.parametrize("scheme", ["gopher", "dav", "s3", ""])
def test_a_scheme_no_protocol_declares_is_refused_everywhere(scheme: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        check_url(f"{scheme}://storage.example.org//data/file")
    assert caught.value.field == "url"
    with pytest.raises(ValueError, match="no backend"):
        backend_for(scheme)


@pytest.mark.parametrize(("protocol", "operation"), UNSUPPORTED, ids=ids)
def test_an_operation_the_protocol_does_not_support_is_refused_naming_operation(
    protocol: Protocol, operation: Operation
) -> None:
    for scheme in protocol.scheme_names:
        run = RunParams(urls=(url_of(scheme),), method=Method.COPY, operation=operation)
        with pytest.raises(InvalidParams) as caught:
            run.validate()
        assert caught.value.field == "operation"
        assert f"does not support '{operation}'" in caught.value.message
        assert scheme in caught.value.message


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids)
def test_a_supported_operation_passes_the_check(protocol: Protocol) -> None:
    method = Method.COPY if protocol.copy_only else Method.DIRECT
    for scheme in protocol.scheme_names:
        for operation in protocol.operations:
            # A third-party copy also needs its destination, a folder of the same protocol.
            copies = Operation(operation) in TPC_OPERATIONS
            RunParams(
                urls=(url_of(scheme),),
                method=method,
                operation=Operation(operation),
                destination=url_of(scheme) + "-copies" if copies else None,
            ).validate()


def test_declarations_name_real_operations_and_credential_methods_once() -> None:
    operations = {str(operation) for operation in Operation}
    for protocol in PROTOCOLS:
        assert protocol.operations <= operations
        assert protocol.planned <= operations
        assert not protocol.operations & protocol.planned, protocol.name
        for scheme in protocol.schemes:
            assert scheme.proxy is None or AuthMethod(scheme.proxy) in AuthMethod
    names = [scheme.name for protocol in PROTOCOLS for scheme in protocol.schemes]
    assert len(names) == len(set(names)) == len(SCHEMES)


def test_copy_only_protocols_refuse_direct_reads_naming_method() -> None:
    for protocol in PROTOCOLS:
        for scheme in protocol.scheme_names:
            run = RunParams(urls=(url_of(scheme),), method=Method.DIRECT)
            if protocol.copy_only:
                with pytest.raises(InvalidParams) as caught:
                    run.validate()
                assert caught.value.field == "method"
            else:
                run.validate()


@pytest.mark.parametrize(("protocol", "scheme"), DECLARED, ids=ids)
def test_credentials_are_presented_as_the_scheme_declares(protocol: Protocol, scheme: str) -> None:
    declared = SCHEMES[scheme]
    token = Credential(CredentialKind.TOKEN, "")
    proxy = Credential(CredentialKind.X509_PROXY, "")
    if declared.token:
        assert token.auth_method(scheme) == AuthMethod.TOKEN
    else:
        with pytest.raises(InvalidParams, match=f"{scheme}://"):
            token.auth_method(scheme)
    if declared.proxy is not None:
        assert proxy.auth_method(scheme) == AuthMethod(declared.proxy)
    else:
        with pytest.raises(InvalidParams, match=r"takes no X\.509 proxy"):
            proxy.auth_method(scheme)


@pytest.mark.parametrize(("protocol", "scheme"), DECLARED, ids=ids)
def test_a_credential_goes_to_the_declared_port_of_a_url_naming_none(
    protocol: Protocol, scheme: str
) -> None:
    """The endpoint's own server is its host at the scheme's declared port; another port
    is another server, unless the protocol's data channel takes any (GridFTP)."""
    port = DEFAULT_PORTS.get(scheme)
    if port is None:
        assert scheme == "file"  # connects nowhere
        return
    scope = CredentialScope.of([url_of(scheme)], (), any_port=protocol.credential_any_port)
    assert scope.allows("storage.example.org", port)
    assert scope.allows("storage.example.org", port + 1) is protocol.credential_any_port
    assert not scope.allows("other.example.org", port)


@pytest.mark.lab
def test_every_lab_endpoint_speaks_a_declared_scheme_with_the_credential_it_carries(
    lab: Any,
) -> None:
    for endpoint in lab.endpoints():
        file = endpoint.files[0].path
        assert check_url(endpoint.file_url(file)) == endpoint.protocol, endpoint.name
        declared = SCHEMES[endpoint.protocol]
        if endpoint.auth == "token":
            assert declared.token, endpoint.name
        if endpoint.auth == "x509":
            assert declared.proxy is not None, endpoint.name
