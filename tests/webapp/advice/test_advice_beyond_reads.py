"""The advice beside runs of other operations than reads (issue 20): the read questions rest
on reads only, and where it applies the advice answers for writes, metadata storms,
third-party copies and the address families, with the same machinery (verdicts, intervals,
evidence, too thin with its campaign)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    user,
)
from webapp.advice import model
from webapp.advice.model import Link
from webapp.advice.selectors import endpoint_advice
from webapp.advice.statements import Statement
from webapp.advice.suggestions import create_suggested_campaign
from webapp.campaigns.models import ClientAttempt, Run
from webapp.sites.models import Endpoint, TestFile, VantagePoint

# Also on SQLite (bin/run's default database), which gives the run JSON's strings back
# decoded ("4" as 4).
pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

MIB = 1024 * 1024
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NEAR = Link(rtt_s=0.026, bandwidth_bps=12.5e6)
SESSION_S = model.SESSION_RTTS * NEAR.rtt_s
COUNTS = (1, 2, 4, 8, 16, 32)


def measured(test_file: TestFile, vantage_point: VantagePoint, **fields: Any) -> Run:
    """A succeeded run as the engine would have stored it."""
    values: dict[str, Any] = {
        "status": Run.Status.SUCCEEDED,
        "finished_at": NOW - timedelta(days=1),
        "result": {"preflight_rtt_ms": 26.0},
        "bytes_read": 1,
        "clients": 1,
    }
    values |= fields
    return RunFactory(test_file=test_file, vantage_point=vantage_point, **values)


def about(statements: list[Statement], question: str, operation: str | None = None) -> list:
    return [
        s
        for s in statements
        if s.question == question
        and (operation is None or s.scope.get("operation", "read") == operation)
    ]


def read_sweep(test_file: TestFile, local: VantagePoint) -> None:
    """A client sweep of 1 MiB sequential reads whose rate reaches the link at 8 clients."""
    for clients in COUNTS:
        for repetition in range(2):
            rate = model.client_sweep(NEAR, per_client_bps=2e6, clients=clients)
            measured(
                test_file,
                local,
                method="direct",
                pattern="sequential",
                read_size=MIB,
                fraction=1.0,
                clients=clients,
                repetition=repetition,
                bytes_read=clients * MIB,
                bytes_wire=clients * MIB,
                wall_s=SESSION_S + clients * MIB / rate * (1 + 0.01 * repetition),
            )


def crossover_runs(test_file: TestFile, local: VantagePoint) -> None:
    """Direct 1 KiB random reads and copies, timed as the model says: a crossover."""
    for fraction in (0.001, 0.01, 0.1):
        for repetition, jitter in enumerate((0.98, 1.02)):
            direct = model.direct_read_s(
                NEAR, file_size=test_file.size, read_size=1024, fraction=fraction
            )
            for method, wall in (("direct", direct), ("copy", model.copy_s(NEAR, file_size=MIB))):
                measured(
                    test_file,
                    local,
                    method=method,
                    read_size=1024,
                    fraction=fraction,
                    repetition=repetition,
                    wall_s=wall * jitter,
                    bytes_read=int(fraction * test_file.size),
                )


def test_writes_and_stat_storms_change_no_read_answer() -> None:
    """A write's and a stat storm's runs share the reads' parameters (a campaign's axes
    apply to every operation) but not their meaning: before issue 20's advice, their times
    were taken as reads' and moved the knee and the crossover."""
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    read_sweep(test_file, local)
    crossover_runs(test_file, local)
    alone = endpoint_advice(test_file.endpoint, local, now=NOW)
    [knee] = about(alone, "knee")
    [crossover] = about(alone, "crossover")
    assert knee.verdict == "knee" and knee.value == 8
    assert crossover.verdict == "crossover"

    others = []
    # Writes read nothing: as reads they would be a rate of zero, and halve the low counts'.
    for clients in (1, 2, 4, 8) * 2:
        others.append(
            measured(
                test_file,
                local,
                operation="write",
                method="direct",
                pattern="sequential",
                read_size=MIB,
                fraction=1.0,
                clients=clients,
                bytes_read=0,
                wall_s=5.0,
                throughput_mbps=40.0,
                result={"preflight_rtt_ms": 26.0, "bytes_written": clients * 16 * MIB},
            )
        )
    for fraction in (0.001, 0.01, 0.1):  # stat storms as slow as a day's reading
        others.append(
            measured(
                test_file,
                local,
                operation="stat",
                method="direct",
                read_size=1024,
                fraction=fraction,
                wall_s=60.0,
                result={"preflight_rtt_ms": 26.0, "ops_per_s": 500.0},
            )
        )
    beside = endpoint_advice(test_file.endpoint, local, now=NOW)
    [knee_beside] = about(beside, "knee", "read")
    [crossover_beside] = about(beside, "crossover")
    for before, after in ((crossover, crossover_beside), (knee, knee_beside)):
        assert (after.verdict, after.value, after.interval) == (
            before.verdict,
            before.value,
            before.interval,
        )
        assert after.text == before.text
        assert after.evidence == before.evidence
        assert after.scope["model_link"] == before.scope["model_link"]
    assert not {r.pk for r in others} & {
        r
        for s in beside
        for r in s.evidence
        if s.enough_data and s.scope.get("operation", "read") == "read"
    }
    assert knee_beside.scope["operation"] == "read"


def write_sweep(test_file: TestFile, local: VantagePoint, counts: tuple[int, ...] = COUNTS) -> None:
    """Writes of 16 MiB files whose rate stops growing at 8 clients (40 MB/s)."""
    for clients in counts:
        for repetition in range(2):
            rate = min(clients * 6.0, 40.0) * (1 + 0.01 * repetition)
            measured(
                test_file,
                local,
                operation="write",
                method="direct",
                pattern="sequential",
                read_size=MIB,
                fraction=1.0,
                clients=clients,
                repetition=repetition,
                bytes_read=0,
                wall_s=clients * 16 * MIB / (rate * 1e6) + 0.2,
                throughput_mbps=rate,
                result={"preflight_rtt_ms": 26.0, "bytes_written": clients * 16 * MIB},
            )


def test_writes_stop_scaling_at_a_client_count() -> None:
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe")
    test_file = TestFileFactory(endpoint=endpoint, size=MIB)
    local = VantagePointFactory()
    write_sweep(test_file, local)
    statements = endpoint_advice(endpoint, local, now=NOW)
    [writes] = about(statements, "knee", "write")
    assert writes.verdict == "knee"
    assert writes.value == 8  # 8 x 6 = 48 MB/s: past 85% of the 40 MB/s top
    assert writes.interval == (8.0, 8.0)
    assert writes.text.startswith("Writes stop scaling at 8 clients (322 Mbit/s written")
    assert writes.scope["file_size"] == 16 * MIB and writes.scope["read_size"] == MIB
    assert writes.scope["aggregate_bps"] == pytest.approx(40e6 * 1.005)
    assert writes.model_prediction is None and writes.model_agrees is None
    assert len(writes.evidence) == 12
    # The reads' knee is still asked, and too thin: its campaign reads.
    [reads] = about(statements, "knee", "read")
    assert reads.verdict == "too-thin"
    assert reads.suggested_campaign is not None
    assert reads.suggested_campaign["operations"] == ["read"]


def test_a_stat_storms_rate_flattens_at_a_client_count() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    for clients in (1, 2, 4, 8):
        for repetition in range(2):
            measured(
                test_file,
                local,
                operation="stat",
                clients=clients,
                repetition=repetition,
                wall_s=2.0,
                result={"ops_per_s": min(clients * 1000.0, 2500.0) + repetition},
            )
    [stat] = about(endpoint_advice(test_file.endpoint, local, now=NOW), "knee", "stat")
    assert stat.verdict == "knee"
    assert stat.value == 4
    assert stat.text.startswith("The stat rate flattens at 4 clients (2,500 ops/s")
    assert stat.scope["rates_ops_per_s"] == [1000.5, 2000.5, 2500.5, 2500.5]
    assert stat.scope["rate"] == 0.0


def test_a_write_knee_too_thin_suggests_a_write_sweep_where_writes_may_go() -> None:
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe")
    test_file = TestFileFactory(endpoint=endpoint, size=MIB)
    local = VantagePointFactory()
    write_sweep(test_file, local, counts=(1, 2))
    [thin] = about(endpoint_advice(endpoint, local, now=NOW), "knee", "write")
    assert thin.verdict == "too-thin" and not thin.enough_data
    assert "writes of one size at three client counts or more" in thin.text
    suggested = thin.suggested_campaign
    assert suggested is not None
    assert suggested["operations"] == ["write"] and suggested["operation"] == "write"
    assert suggested["clients"] == list(COUNTS)
    campaign = create_suggested_campaign(
        question="knee",
        endpoint=endpoint,
        vantage_point=local,
        owner=user("olga", "operator"),
        operation="write",
    )
    assert campaign.operations == ["write"] and campaign.clients == list(COUNTS)
    assert not campaign.runs.exists()

    # Without a scratch path nothing may be written: no campaign, and the text says why.
    Endpoint.objects.filter(pk=endpoint.pk).update(scratch_path="")
    endpoint.refresh_from_db()
    [refused] = about(endpoint_advice(endpoint, local, now=NOW), "knee", "write")
    assert refused.suggested_campaign is None
    assert "scratch path" in refused.text


def copies(
    source: TestFile, local: VantagePoint, destination: Endpoint, operation: str, times: tuple
) -> list[Run]:
    """Copies of `source` to `destination`, a run per (copy time, time to start) pair of
    each client."""
    made = []
    for repetition, clients in enumerate(times):
        run = measured(
            source,
            local,
            operation=operation,
            destination_endpoint=destination,
            method="direct",
            pattern="sequential",
            read_size=MIB,
            fraction=1.0,
            repetition=repetition,
            wall_s=max(c for c, _ in clients) + 0.1,
        )
        for client, (copy_s, start_s) in enumerate(clients):
            ClientAttempt.objects.create(
                run=run,
                client=client,
                status=ClientAttempt.Status.OK,
                heartbeat_at=NOW,
                record={"wall_s": copy_s + 0.1, "tpc": {"copy_s": copy_s, "start_s": start_s}},
            )
        made.append(run)
    return made


def test_pulled_copies_are_faster_than_pushed_ones() -> None:
    source = EndpointFactory(protocol=Endpoint.Protocol.HTTPS, base_url="https://a.example/")
    destination = EndpointFactory(
        protocol=Endpoint.Protocol.HTTPS, base_url="https://b.example/", scratch_path="/s"
    )
    test_file = TestFileFactory(endpoint=source, size=64 * MIB)
    local = VantagePointFactory()
    pulled = copies(test_file, local, destination, "tpc-pull", (((1.0, 0.2),), ((1.1, 0.2),)))
    pushed = copies(test_file, local, destination, "tpc-push", (((2.0, 0.5),), ((2.1, 0.6),)))
    statements = endpoint_advice(source, local, now=NOW)
    [tpc] = about(statements, "tpc-direction")
    assert tpc.verdict == "pull-faster"
    assert tpc.value == pytest.approx(1.05 / 2.05)
    assert tpc.unit == "time ratio"
    assert tpc.interval is not None and tpc.interval[1] < 1
    assert tpc.scope["destination"] == destination.pk
    assert tpc.scope["pull_start_s"] == pytest.approx(0.2)
    assert tpc.scope["push_start_s"] == pytest.approx(0.55)
    assert tpc.text.startswith("Let the destination pull: 64 MiB copies pulled take 51%")
    assert "first perf marker after 0.2 s pulled, 0.55 s pushed" in tpc.text
    assert tpc.evidence == sorted(r.pk for r in pulled + pushed)
    # Copies are no reads: the read questions stay too thin.
    assert all(s.verdict == "too-thin" for s in about(statements, "crossover"))


def test_copies_one_way_only_suggest_both_ways_to_the_same_destination() -> None:
    source = EndpointFactory(protocol=Endpoint.Protocol.HTTPS, base_url="https://a.example/")
    destination = EndpointFactory(
        protocol=Endpoint.Protocol.HTTPS, base_url="https://b.example/", scratch_path="/s"
    )
    test_file = TestFileFactory(endpoint=source, size=64 * MIB)
    local = VantagePointFactory()
    copies(test_file, local, destination, "tpc-pull", (((1.0, 0.2),),))
    [thin] = about(endpoint_advice(source, local, now=NOW), "tpc-direction")
    assert thin.verdict == "too-thin"
    suggested = thin.suggested_campaign
    assert suggested is not None
    assert suggested["operations"] == ["tpc-pull", "tpc-push"]
    assert suggested["destination_endpoint"] == destination.pk
    campaign = create_suggested_campaign(
        question="tpc-direction",
        endpoint=source,
        vantage_point=local,
        owner=user("olga", "operator"),
    )
    assert campaign.destination_endpoint == destination
    assert campaign.operations == ["tpc-pull", "tpc-push"]


def test_an_endpoint_read_only_is_asked_nothing_beyond_reads() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    crossover_runs(test_file, local)
    statements = endpoint_advice(test_file.endpoint, local, now=NOW)
    assert [s.question for s in statements] == ["crossover", "knee", "latency-hiding", "read-ahead"]


def pinned(test_file: TestFile, local: VantagePoint, family: str, walls: tuple, **fields: Any):
    """Reads pinned to `family` (as the run JSON says: the family used)."""
    used = fields.pop("used", family)
    return [
        measured(
            test_file,
            local,
            address_family=family,
            repetition=repetition,
            wall_s=wall,
            result={"preflight_rtt_ms": 26.0, "address_family": used},
            **fields,
        )
        for repetition, wall in enumerate(walls)
    ]


def test_ipv6_slower_than_ipv4_for_the_same_runs() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    over4 = pinned(test_file, local, "4", (1.0, 1.05, 0.95))
    over6 = pinned(test_file, local, "6", (1.5, 1.6, 1.4))
    # Pinned to 6 but gone over IPv4 (the run JSON says so): it counts as IPv4.
    over4 += pinned(test_file, local, "6", (1.0,), used="4")
    [family] = about(endpoint_advice(test_file.endpoint, local, now=NOW), "address-family")
    assert family.verdict == "ipv6-slower"
    assert family.value == pytest.approx(1.5 / 1.0)
    assert family.unit == "x"
    assert family.interval is not None and family.interval[0] > 1
    assert family.scope["operation"] == "read" and family.scope["read_size"] == 65536
    assert family.scope["ipv4_s"] == pytest.approx(1.0)
    assert family.text.startswith("IPv6 is slower for 64 KiB random reads of 10%")
    assert family.evidence == sorted(r.pk for r in over4 + over6)


def test_families_the_runs_cannot_tell_apart_are_no_difference() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    pinned(test_file, local, "4", (1.0, 1.3, 0.8))
    pinned(test_file, local, "6", (1.2, 0.9, 1.35))  # 15% slower on average, within noise
    [family] = about(endpoint_advice(test_file.endpoint, local, now=NOW), "address-family")
    assert family.verdict == "no-difference"
    assert family.interval is not None and family.interval[0] < 1 < family.interval[1]
    assert "IPv4 and IPv6 take as long" in family.text


def test_one_family_only_suggests_the_same_runs_over_the_other() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    pinned(test_file, local, "4", (1.0, 1.1), pattern="sequential", clients=4)
    [thin] = about(endpoint_advice(test_file.endpoint, local, now=NOW), "address-family")
    assert thin.verdict == "too-thin"
    suggested = thin.suggested_campaign
    assert suggested is not None
    assert suggested["address_family"] == "6"
    assert suggested["patterns"] == ["sequential"] and suggested["clients"] == [4]
    assert suggested["operations"] == ["read"]
    campaign = create_suggested_campaign(
        question="address-family",
        endpoint=test_file.endpoint,
        vantage_point=local,
        owner=user("olga", "operator"),
    )
    assert campaign.address_family == "6"
    assert list(campaign.test_files.all()) == [test_file]


def test_a_suggested_campaign_of_another_operation_is_refused_naming_it() -> None:
    test_file = TestFileFactory(size=MIB)
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as refused:
        create_suggested_campaign(
            question="crossover",
            endpoint=test_file.endpoint,
            vantage_point=VantagePointFactory(),
            owner=user("olga", "operator"),
            operation="write",
        )
    assert "operation" in refused.value.message_dict
