"""The credential's scope on its own: by name (a redirector's located servers) and by address
(the egress guard), with a resolver of the test's own standing in for DNS, so that names
under a site's domain, reverse names and round-robin answers can be set up at will. The
real resolver, XrdCl and the guard are in test_credential_redirects.py."""

from __future__ import annotations

import ipaddress

import pytest

from workers.engine.credential_scope import AddressScope, CredentialScope
from workers.engine.egress import IPAddress
from workers.engine.errors import ErrorClass, ProbeError

DOOR = "root://door.example.org:1094//store/f"
# What the test's DNS says: forward names, and the reverse name of each address.
FORWARD = {
    "door.example.org": ["192.0.2.10", "2001:db8::10"],
    "pool7.example.org": ["192.0.2.17"],
    "pool8.dc.example.org": ["192.0.2.18"],
    "liar.attacker.net": ["198.51.100.66"],
}
REVERSE = {
    "192.0.2.17": "pool7.example.org",
    "192.0.2.18": "pool8.dc.example.org",
    # The attacker controls the reverse zone of its own address: it may claim any name.
    "198.51.100.66": "pool9.example.org",
}


def ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


class Dns:
    def __init__(self) -> None:
        self.forward = {name: list(addresses) for name, addresses in FORWARD.items()}
        self.asked: list[str] = []

    def resolve(self, host: str) -> list[IPAddress]:
        self.asked.append(host)
        return [ip(address) for address in self.forward.get(host, [])]

    def reverse(self, address: IPAddress) -> str | None:
        return REVERSE.get(str(address))


def scope(*hosts: str, any_port: bool = False) -> tuple[AddressScope, Dns]:
    dns = Dns()
    judge = AddressScope(
        CredentialScope.of((DOOR,), hosts, any_port=any_port), dns.resolve, dns.reverse
    )
    return judge, dns


def test_by_default_only_the_endpoints_own_server_at_its_port() -> None:
    judge, _ = scope()
    assert judge.allows(ip("192.0.2.10"), 1094)
    assert judge.allows(ip("2001:db8::10"), 1094)
    assert not judge.allows(ip("192.0.2.10"), 1095)  # another server on the same host
    assert not judge.allows(ip("192.0.2.17"), 1094)
    refusal = judge.refusal(ip("192.0.2.17"), 1094)
    assert "a connection to 192.0.2.17:1094 (pool7.example.org)" in refusal
    assert "own server (door.example.org:1094)" in refusal
    assert "credential_hosts (none)" in refusal


def test_a_listed_name_counts_at_any_port_by_its_addresses() -> None:
    judge, _ = scope("pool7.example.org")
    assert judge.allows(ip("192.0.2.17"), 1094)
    assert judge.allows(ip("192.0.2.17"), 2094)
    assert not judge.allows(ip("192.0.2.18"), 1094)


def test_a_listed_suffix_needs_the_reverse_name_confirmed_forward() -> None:
    judge, _ = scope(".example.org")
    assert judge.allows(ip("192.0.2.17"), 1094)
    assert judge.allows(ip("192.0.2.18"), 1094)  # a name deeper under the suffix
    # Its reverse name claims pool9.example.org, which does not resolve to it.
    assert not judge.allows(ip("198.51.100.66"), 1094)


def test_a_round_robin_name_is_asked_again_on_a_miss_and_verdicts_are_kept() -> None:
    judge, dns = scope("pool7.example.org")
    assert judge.allows(ip("192.0.2.17"), 1094)
    dns.forward["pool7.example.org"] = ["192.0.2.27"]  # the next answer, in turn
    assert judge.allows(ip("192.0.2.27"), 1094)
    asked = len(dns.asked)
    assert judge.allows(ip("192.0.2.27"), 1094)
    assert len(dns.asked) == asked  # kept for the run


def test_gridftp_takes_any_port_of_the_endpoints_own_addresses() -> None:
    judge, _ = scope(any_port=True)
    assert judge.allows(ip("192.0.2.10"), 50123)
    assert not judge.allows(ip("192.0.2.17"), 50123)


def test_by_name_a_redirectors_servers_are_judged_as_written() -> None:
    rule = CredentialScope.of((DOOR,), (".example.org",))
    assert rule.server_refusal("door.example.org:1094") is None
    assert rule.server_refusal("pool7.example.org:1094") is None
    assert rule.server_refusal("pool7.example.org.attacker.net:1094") is not None
    own_only = CredentialScope.of((DOOR,), ())
    assert own_only.server_refusal("door.example.org:1095") is not None
    with pytest.raises(ProbeError) as refused:
        own_only.check_server("pool7.example.org:1094")
    assert refused.value.error_class == ErrorClass.EGRESS
    assert "pool7.example.org:1094 is neither the endpoint's own server" in refused.value.message
