"""The advice from runs built by the factories: each question's verdict, its interval and
evidence, the model beside it, staleness, and "too thin" with its campaign."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.test import override_settings

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    user,
)
from webapp.advice import bootstrap, model
from webapp.advice.answers import _crossover_of, _crossovers, _knee_of, _knees, choice_at
from webapp.advice.model import Link
from webapp.advice.selectors import campaign_advice, endpoint_advice, site_advice
from webapp.advice.suggestions import create_suggested_campaign
from webapp.campaigns.models import Campaign, ClientAttempt, Run
from webapp.sites.models import Endpoint, TestFile, VantagePoint

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
# The near site: 26 ms, 100 Mbit/s; a copy tool that takes 50 ms to start.
NEAR = Link(rtt_s=0.026, bandwidth_bps=12.5e6, overhead_s=0.0, copy_setup_s=0.05)
SESSION_S = model.SESSION_RTTS * NEAR.rtt_s


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


def modelled_runs(
    test_file: TestFile,
    vantage_point: VantagePoint,
    read_size: int,
    jitters: tuple[float, ...] = (0.98, 1.02),
    slower: float = 1.0,
) -> None:
    """Direct and copy runs at three fractions, a repetition per jitter, timed as the model
    says (plus a little spread; direct reads `slower` times as long), with the sync reads'
    latency of one round trip."""
    size = test_file.size
    for fraction in (0.001, 0.01, 0.1):
        for repetition, jitter in enumerate(jitters):
            direct = model.direct_read_s(
                NEAR, file_size=size, read_size=read_size, fraction=fraction
            )
            copy = model.copy_s(NEAR, file_size=size)
            for method, wall in (("direct", direct * slower), ("copy", copy)):
                measured(
                    test_file,
                    vantage_point,
                    method=method,
                    read_size=read_size,
                    fraction=fraction,
                    repetition=repetition,
                    wall_s=wall * jitter,
                    latency_p50_us=NEAR.read_s(read_size) * 1e6 if method == "direct" else None,
                    bytes_read=int(fraction * size),
                )


def test_small_reads_cross_over_to_copying_first_where_the_model_says() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)

    statements = endpoint_advice(test_file.endpoint, local, now=NOW)

    [crossover] = [s for s in statements if s.question == "crossover"]
    assert crossover.verdict == "crossover"
    assert crossover.enough_data
    assert crossover.scope["read_size"] == 1024
    assert choice_at(crossover, 0.1) == "copy-first"
    assert choice_at(crossover, 0.001) == "read-directly"
    assert crossover.value is not None and 0.001 < crossover.value < 0.1
    assert crossover.interval is not None
    low, high = crossover.interval
    assert low <= crossover.value <= high
    assert crossover.model_prediction is not None
    assert "within 25%" in crossover.model_text
    assert len(crossover.evidence) == 12
    assert crossover.measured_at == NOW - timedelta(days=1)
    assert not crossover.stale
    assert "Copy the file first when reading more than" in crossover.text
    link = crossover.scope["model_link"]
    assert link["rtt_s"] == pytest.approx(0.026)  # the preflight round trip
    assert link["overhead_s"] == pytest.approx(0.0, abs=1e-4)  # latency p50 = one round trip


def test_the_interval_is_the_same_for_the_same_runs_and_widens_with_their_spread() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    first = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    again = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert first[0].interval == again[0].interval
    narrow = first[0].interval
    # A third, slow repetition of the smallest direct reads spreads them.
    measured(
        test_file, local, method="direct", read_size=1024, fraction=0.01, repetition=2, wall_s=1.5
    )
    [wide] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert wide.interval is not None and narrow is not None
    assert wide.interval[1] - wide.interval[0] > narrow[1] - narrow[0]


def test_large_reads_are_read_directly() -> None:
    test_file = TestFileFactory(size=16 * MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=MIB)
    [crossover] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert crossover.verdict == "read-directly"
    assert choice_at(crossover, 0.1) == "read-directly"
    assert crossover.interval is None
    # The model's crossover lies beyond the measured 10%: it agrees.
    assert crossover.model_prediction is not None and crossover.model_prediction > 0.1
    assert "agrees with the runs" in crossover.model_text


def test_the_clients_times_are_what_the_bootstrap_resamples() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    run = Run.objects.filter(method="direct", fraction=0.01).first()
    assert run is not None
    for client, wall in enumerate((0.2, 0.9)):
        ClientAttempt.objects.create(
            run=run,
            client=client,
            status=ClientAttempt.Status.OK,
            heartbeat_at=NOW,
            record={"wall_s": wall},
        )
    [crossover] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert crossover.interval is not None
    assert crossover.interval[1] - crossover.interval[0] > 0.01


def test_the_knee_is_where_the_aggregate_rate_reaches_the_link() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    per_client = 2e6  # bytes/s one client gets alone
    for clients in (1, 2, 4, 8, 16, 32):
        for repetition in range(2):
            rate = model.client_sweep(NEAR, per_client_bps=per_client, clients=clients)
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
    [knee] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "knee"
    ]
    assert knee.verdict == "knee"
    assert knee.value == 8  # 8 clients x 2 MB/s = 16 MB/s is past 85% of 12.5 MB/s
    assert knee.interval == (8.0, 8.0)
    # Sync 1 MiB reads, 2 MB/s a client alone: in the model's closed loop (each read also
    # waits for the others' bytes on the link) 7 clients first get 85% of 12.5 MB/s.
    assert knee.model_prediction == 7
    # What each of the 8 clients got, their session's round trips included.
    each = MIB / (SESSION_S + 8 * MIB / 12.5e6)
    assert knee.scope["per_client_bps"] == pytest.approx(each, rel=0.02)
    assert "stops growing at 8 clients" in knee.text


def test_async_reads_pay_off_and_read_ahead_only_moves_bytes() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    common = {"method": "direct", "read_size": 4096, "fraction": 0.1}
    for repetition in range(2):
        measured(test_file, local, pattern="random", wall_s=0.8, repetition=repetition, **common)
        measured(test_file, local, pattern="async", wall_s=0.2, repetition=repetition, **common)
        measured(
            test_file,
            local,
            pattern="random",
            readahead=MIB,
            wall_s=0.85,
            bytes_requested=104858,
            bytes_wire=MIB,
            repetition=repetition,
            **common,
        )
    statements = endpoint_advice(test_file.endpoint, local, now=NOW)
    [hiding] = [s for s in statements if s.question == "latency-hiding"]
    assert hiding.verdict == "pays-off"
    assert hiding.value == pytest.approx(4.0)
    [ahead] = [s for s in statements if s.question == "read-ahead"]
    assert ahead.verdict == "only-moves-bytes"
    assert ahead.scope["bytes_wire_per_requested"] == pytest.approx(10, rel=0.01)


def test_a_cache_miss_costs_the_cold_runs_extra_time() -> None:
    cache = EndpointFactory(role=Endpoint.Role.CACHE)
    test_file = TestFileFactory(endpoint=cache, size=MIB)
    local = VantagePointFactory()
    for day, wall in ((3, 1.5), (2, 0.3), (1, 0.32)):
        measured(test_file, local, wall_s=wall, finished_at=NOW - timedelta(days=day))
    [statement] = [s for s in endpoint_advice(cache, local, now=NOW) if s.question == "cache"]
    assert statement.verdict == "helps"
    assert statement.value == pytest.approx(1.5 - 0.31)


def test_the_redirection_costs_its_extra_open_time() -> None:
    server = EndpointFactory(base_url="root://127.0.0.1:1095/")
    redirector = EndpointFactory(role=Endpoint.Role.REDIRECTOR, base_url="root://127.0.0.1:1094/")
    local = VantagePointFactory()
    for repetition in range(3):
        measured(
            TestFileFactory(endpoint=redirector),
            local,
            open_s=0.08,
            wall_s=0.5,
            served_by=["127.0.0.1:1095"],
            repetition=repetition,
        )
        measured(TestFileFactory(endpoint=server), local, open_s=0.03, wall_s=0.45)
    [statement] = [
        s for s in endpoint_advice(redirector, local, now=NOW) if s.question == "redirector"
    ]
    assert statement.value == pytest.approx(0.05)
    assert statement.scope["data_servers"] == [server.pk]
    assert statement.verdict == "cheap"


@override_settings(FEDPROBE_ADVICE_MAX_AGE_DAYS=3)
def test_advice_resting_on_old_runs_is_stale() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    Run.objects.update(finished_at=NOW - timedelta(days=5))
    [crossover] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert crossover.stale
    assert crossover.to_json()["stale"] is True


def test_without_runs_every_question_is_too_thin_with_its_campaign() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    statements = endpoint_advice(test_file.endpoint, local, now=NOW)
    assert [s.question for s in statements] == ["crossover", "knee", "latency-hiding", "read-ahead"]
    assert all(s.verdict == "too-thin" and not s.enough_data for s in statements)
    crossover = statements[0]
    suggested = crossover.suggested_campaign
    assert suggested is not None
    assert suggested["methods"] == ["direct", "copy"]
    assert suggested["runs"] == 2 * 2 * 5 * 3  # methods x read sizes x fractions x repetitions
    assert suggested["estimated_bytes"] > 0
    assert suggested["endpoints"] == [test_file.endpoint.pk]
    assert f"{suggested['runs']} runs" in crossover.text
    assert statements[3].suggested_campaign is not None
    assert statements[3].suggested_campaign["readahead"] == MIB


def test_the_suggested_campaign_is_created_not_launched() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    owner = user("olga", "operator")
    campaign = create_suggested_campaign(
        question="knee", endpoint=test_file.endpoint, vantage_point=local, owner=owner
    )
    assert campaign.owner == owner
    assert campaign.clients == [1, 2, 4, 8, 16, 32]
    assert list(campaign.endpoints.all()) == [test_file.endpoint]
    assert list(campaign.vantage_points.all()) == [local]
    assert not campaign.runs.exists()


def test_a_site_has_advice_per_endpoint() -> None:
    test_file = TestFileFactory(size=MIB)
    other = EndpointFactory(site=test_file.endpoint.site, protocol=Endpoint.Protocol.HTTP)
    VantagePoint.objects.all().delete()
    statements = site_advice(test_file.endpoint.site, now=NOW)
    assert {s.endpoint_id for s in statements} == {test_file.endpoint.pk, other.pk}
    assert {s.protocol for s in statements} == {"root", "http"}
    # No vantage point exists: the local one is named, made only when a campaign is.
    assert {s.vantage_point_id for s in statements} == {None}
    assert not VantagePoint.objects.exists()
    assert not Campaign.objects.exists()


def test_a_campaigns_advice_rests_on_its_own_runs_only() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    mine = Run.objects.first()
    assert mine is not None
    statements = campaign_advice(mine.campaign, now=NOW)
    [crossover] = [s for s in statements if s.question == "crossover"]
    # One run of its own: too thin for the campaign, though the endpoint has enough.
    assert crossover.verdict == "too-thin"
    assert {s.endpoint_id for s in statements} == {test_file.endpoint.pk}
    Run.objects.update(campaign=mine.campaign)
    [crossover] = [s for s in campaign_advice(mine.campaign, now=NOW) if s.question == "crossover"]
    assert crossover.verdict == "crossover"


# -- follow-ups (issue 19): speed, one measurement, no measurable cost, disabled, the model --


def test_a_campaign_asked_for_some_questions_answers_only_those() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    campaign = Run.objects.first().campaign  # type: ignore[union-attr]
    Run.objects.update(campaign=campaign)
    statements = campaign_advice(campaign, now=NOW, questions=["crossover"])
    assert [s.question for s in statements] == ["crossover"]
    assert statements[0].verdict == "crossover"
    assert campaign_advice(campaign, now=NOW, questions=[]) == []


def test_the_vectorised_statistics_read_every_resample_as_the_rules_do() -> None:
    """The bootstrap's numpy statistics against the rules they replace, one resample at a
    time, on resamples with crossings, none, and ties (which take the rule's own path)."""
    rng = np.random.default_rng(1)
    fractions = [0.1, 0.25, 0.5, 1.0]
    means = rng.normal(1.0, 0.3, size=(8, 400))
    means[4:, :50] = means[:4, :50]  # ties at every fraction
    means[5, 50:60] = means[1, 50:60]  # one tie inside
    vectorised = _crossovers(fractions)(means)
    one_by_one = bootstrap.per_column(lambda m: _crossover_of(fractions, m[:4], m[4:]))(means)
    np.testing.assert_array_equal(np.isnan(vectorised), np.isnan(one_by_one))
    np.testing.assert_allclose(vectorised[~np.isnan(vectorised)], one_by_one[~np.isnan(one_by_one)])
    counts = [1, 2, 4, 8, 16]
    rates = np.cumsum(rng.uniform(0, 1, size=(5, 400)), axis=0)
    assert list(_knees(counts)(rates)) == [_knee_of(counts, list(c)) for c in rates.T]


def test_a_single_repetition_has_no_interval_and_says_why() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024, jitters=(1.0,))
    [crossover] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert crossover.verdict == "crossover"
    assert crossover.interval is None
    assert "rests on one measurement" in crossover.text
    assert "more repetitions" in crossover.text
    # A second client of one run is a second measurement of that case only: still none.
    run = Run.objects.filter(method="direct", fraction=0.01).first()
    assert run is not None
    for client, wall in enumerate((0.2, 0.9)):
        ClientAttempt.objects.create(
            run=run, client=client, status="ok", heartbeat_at=NOW, record={"wall_s": wall}
        )
    [again] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert again.interval is None


def test_a_redirection_the_runs_cannot_tell_from_zero_is_no_measurable_cost() -> None:
    server = EndpointFactory(base_url="root://127.0.0.1:1095/")
    redirector = EndpointFactory(role=Endpoint.Role.REDIRECTOR, base_url="root://127.0.0.1:1094/")
    local = VantagePointFactory()
    for repetition, (through, at_server) in enumerate(
        ((0.030, 0.036), (0.036, 0.030), (0.027, 0.035))
    ):
        measured(
            TestFileFactory(endpoint=redirector),
            local,
            open_s=through,
            wall_s=0.5,
            served_by=["127.0.0.1:1095"],
            repetition=repetition,
        )
        measured(TestFileFactory(endpoint=server), local, open_s=at_server, wall_s=0.45)
    [statement] = [
        s for s in endpoint_advice(redirector, local, now=NOW) if s.question == "redirector"
    ]
    assert statement.verdict == "no-difference"
    assert "adds no measurable cost" in statement.text
    assert "adds -" not in statement.text and "cheap" not in statement.text
    assert statement.interval is not None and statement.interval[0] < 0
    assert f"{statement.interval[0] * 1000:.3g} ms to" in statement.text
    assert statement.value == 0.0


def test_a_disabled_endpoint_is_too_thin_because_it_is_disabled() -> None:
    test_file = TestFileFactory(size=MIB, endpoint=EndpointFactory(enabled=False))
    statements = endpoint_advice(test_file.endpoint, VantagePointFactory(), now=NOW)
    assert statements and all(s.verdict == "too-thin" for s in statements)
    for statement in statements:
        assert f"{test_file.endpoint.name} is disabled" in statement.text
        assert "Add a test file" not in statement.text


def test_whether_the_model_agrees_is_a_field_written_with_its_sentence() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    modelled_runs(test_file, local, read_size=1024)
    [agrees] = [
        s for s in endpoint_advice(test_file.endpoint, local, now=NOW) if s.question == "crossover"
    ]
    assert agrees.model_agrees is True and agrees.to_json()["model_agrees"] is True
    Run.objects.all().delete()
    modelled_runs(test_file, local, read_size=1024, slower=4.0)
    statements = endpoint_advice(test_file.endpoint, local, now=NOW)
    [disagrees] = [s for s in statements if s.question == "crossover"]
    assert disagrees.model_agrees is False and disagrees.to_json()["model_agrees"] is False
    assert "disagreement" in disagrees.model_text
    assert all(s.model_agrees is None for s in statements if not s.enough_data)


def test_the_bootstrap_stops_early_only_where_every_first_resample_agrees() -> None:
    rng = np.random.default_rng(2)
    groups = [list(rng.normal(1.0, 0.2, 6)), list(rng.normal(2.0, 0.2, 5))]
    ratio = bootstrap.interval(groups, lambda m: m[0] / m[1])
    # Drawn in two steps, the resamples are those of one draw of them all.
    means = bootstrap.resampled_means(groups, np.random.default_rng(bootstrap.SEED), 1000)
    assert ratio == pytest.approx(tuple(np.percentile(means[0] / means[1], [2.5, 97.5])))
    assert ratio == bootstrap.interval(groups, lambda m: m[0] / m[1])  # seeded
    rates = [[10.0, 11.0], [20.0, 21.0], [20.5, 20.0]]  # the knee is at 2 in every resample
    assert bootstrap.interval(rates, _knees([1, 2, 4])) == (2.0, 2.0)
