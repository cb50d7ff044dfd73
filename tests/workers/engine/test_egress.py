"""The egress policy: which addresses workers may connect to, judged after resolution."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, lab_file
from workers.engine import EgressPolicy, ErrorClass, Method, Pattern, ProbeError, RunParams
from workers.engine.driver import run_probe
from workers.engine.egress import literal_refusal, parse_networks

LOOPBACK = ("127.0.0.0/8", "::1/128")
# Allowing everything still leaves the forbidden networks refused.
EVERYTHING = EgressPolicy.allowing(["0.0.0.0/0", "::/0"])


def address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    "forbidden",
    [
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack metadata
        "169.254.0.1",
        "100.100.100.200",  # Alibaba metadata
        "168.63.129.16",  # Azure WireServer
        "fd00:ec2::254",  # AWS metadata over IPv6
        "fe80::1",
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "ff02::1",
        "255.255.255.255",
    ],
)
def test_link_local_and_metadata_addresses_are_refused_whatever_is_allowed(
    forbidden: str,
) -> None:
    why = EVERYTHING.refusal(address(forbidden))
    assert why is not None and "always refused" in why


@pytest.mark.parametrize(
    "carrier",
    [
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:a9fe:a9fe",  # the same, written in hex
        "64:ff9b::a9fe:a9fe",  # NAT64
        "2002:a9fe:a9fe::1",  # 6to4
        "::169.254.169.254",  # IPv4-compatible
    ],
)
def test_ipv6_forms_carrying_a_metadata_address_are_refused(carrier: str) -> None:
    why = EVERYTHING.refusal(address(carrier))
    assert why is not None and "169.254.0.0/16" in why


def test_ipv4_mapped_loopback_is_judged_as_loopback() -> None:
    assert EgressPolicy().refusal(address("::ffff:127.0.0.1")) is not None
    assert EgressPolicy.allowing(["127.0.0.0/8"]).refusal(address("::ffff:127.0.0.1")) is None
    assert EgressPolicy().refusal(address("::ffff:8.8.8.8")) is None


@pytest.mark.parametrize(
    ("restricted", "network"),
    [
        ("127.0.0.1", "127.0.0.0/8"),
        ("::1", "::1/128"),
        ("10.1.2.3", "10.0.0.0/8"),
        ("172.20.0.5", "172.16.0.0/12"),
        ("192.168.1.10", "192.168.0.0/16"),
        ("100.64.0.1", "100.64.0.0/10"),
        ("fd12:3456::1", "fc00::/7"),
    ],
)
def test_loopback_and_private_addresses_need_an_allowance(restricted: str, network: str) -> None:
    why = EgressPolicy().refusal(address(restricted))
    assert why is not None and "not allowed here" in why
    assert EgressPolicy.allowing([network]).refusal(address(restricted)) is None


def test_an_allowance_reaches_no_further_than_its_network() -> None:
    policy = EgressPolicy.allowing(["10.1.0.0/16"])
    assert policy.refusal(address("10.1.200.7")) is None
    assert policy.refusal(address("10.2.0.1")) is not None


def test_allowing_unique_local_addresses_does_not_allow_the_aws_metadata_one() -> None:
    policy = EgressPolicy.allowing(["fc00::/7"])
    assert policy.refusal(address("fd00:ec2::1")) is None
    assert policy.refusal(address("fd00:ec2::254")) is not None


@pytest.mark.parametrize("public", ["188.184.21.108", "8.8.8.8", "2001:1458:201::100"])
def test_global_addresses_pass_without_an_allowance(public: str) -> None:
    assert EgressPolicy().refusal(address(public)) is None


def test_a_host_name_is_judged_by_the_addresses_it_resolves_to() -> None:
    with pytest.raises(ProbeError) as refused:
        EgressPolicy().check_host("localhost", 1094)
    assert refused.value.error_class is ErrorClass.EGRESS
    assert "refused by egress policy: localhost resolves to 127.0.0.1" in refused.value.message
    resolved = EgressPolicy.allowing(LOOPBACK).check_host("localhost", 1094)
    assert address("127.0.0.1") in resolved


def test_numeric_spellings_of_a_metadata_address_are_refused() -> None:
    # The resolver reads 2852039166 and 0xa9fea9fe as 169.254.169.254.
    for spelling in ("2852039166", "0xa9fea9fe", "169.254.43518"):
        with pytest.raises(ProbeError) as refused:
            EVERYTHING.check_host(spelling, 80)
        assert refused.value.error_class is ErrorClass.EGRESS
        assert "169.254.169.254" in refused.value.message


def test_literal_refusal_names_forbidden_literals_and_looks_nothing_up() -> None:
    assert "169.254.0.0/16" in (literal_refusal("169.254.169.254") or "")
    assert "169.254.0.0/16" in (literal_refusal("2852039166") or "")
    assert "fe80::/10" in (literal_refusal("[fe80::1]") or "")
    assert "fe80::/10" in (literal_refusal("fe80::1%25no-such-interface") or "")
    assert literal_refusal("10.0.0.1") is None  # an administrator may allow it on a worker
    assert literal_refusal("metadata.google.internal") is None  # names are for the worker


def test_check_url_ignores_file_urls_and_uses_the_urls_host() -> None:
    assert EgressPolicy().check_url("file:///data/f") == []
    with pytest.raises(ProbeError):
        EgressPolicy().check_url("root://[::1]:1094//f")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("10.0.0.0/33", "not a network"),
        ("10.0.0.1/8", "not a network"),  # host bits set: say 10.0.0.0/8
        ("lab", "not a network"),
        ("169.254.169.254/32", "cannot be allowed"),
        ("fe80::/64", "cannot be allowed"),
    ],
)
def test_malformed_or_forbidden_allowances_are_rejected(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_networks([text])


# -- runs against the lab ----------------------------------------------------------------


@pytest.mark.lab
@pytest.mark.parametrize("endpoint", ["local-root", "local-http", "local-ftp"])
def test_a_run_on_loopback_is_refused_before_any_client_starts_unless_allowed(
    lab: Any, endpoint: str
) -> None:
    url, _ = lab_file(lab, endpoint, FILE_4M)
    method = Method.COPY if endpoint == "local-ftp" else Method.DIRECT
    refused = run_probe(RunParams(urls=(url,), method=method, egress=EgressPolicy())).to_json()
    assert refused["status"] == "failed"
    assert refused["clients"] == []
    [error] = refused["errors"]  # type: ignore[misc]
    assert error["class"] == "egress"
    assert "refused by egress policy: 127.0.0.1 resolves to 127.0.0.1" in error["message"]
    allowed = EgressPolicy.allowing(LOOPBACK)
    run = run_probe(RunParams(urls=(url,), method=method, clients=2, egress=allowed)).to_json()
    assert run["status"] == "succeeded", run["errors"]


@pytest.mark.lab
def test_a_redirector_run_checks_the_data_servers_and_succeeds_when_they_are_allowed(
    lab: Any,
) -> None:
    owner = lab.endpoint("fed-b-root")
    url = lab.endpoint("redirector-root").file_url(owner.files[0].path)
    params = RunParams(urls=(url,), clients=2, egress=EgressPolicy.allowing(LOOPBACK))
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["served_by"] == [owner.url.split("://")[1].strip("/")]


@pytest.mark.lab
def test_async_http_reads_connect_through_the_policy(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    params = RunParams(
        urls=(url,), pattern=Pattern.ASYNC, depth=4, egress=EgressPolicy.allowing(LOOPBACK)
    )
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
