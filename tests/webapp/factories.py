"""factory_boy factories for the web application's models, users of a role with clients
logged in as them, and credentials to store."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

import factory
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from webapp.accounts.models import Team
from webapp.accounts.services import team_create, team_member_add, user_set_role
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from webapp.watch.models import Regression, SeriesNight


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    name = factory.Sequence(lambda n: f"site-{n}")
    tier = "T2"
    storage_system = "xrootd"


class EndpointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Endpoint

    site = factory.SubFactory(SiteFactory)
    name = factory.Sequence(lambda n: f"endpoint-{n}")
    protocol = Endpoint.Protocol.ROOT
    base_url = "root://127.0.0.1:1094/"


class TestFileFactory(factory.django.DjangoModelFactory):
    __test__ = False

    class Meta:
        model = TestFile

    endpoint = factory.SubFactory(EndpointFactory)
    path = factory.Sequence(lambda n: f"/data/file-{n}")
    size = 16 * 1024 * 1024
    is_default = True


class VantagePointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = VantagePoint
        django_get_or_create = ("name",)

    name = "local"


# The vantage point of runs a test launches and then measures in its own process
# (run_execute): no worker of a test session consumes its queue. On "local" the session's
# Celery worker (tests/conftest.py), once any test in the process has started it, would take
# the run first, and the test would read it still running.
IN_PROCESS = "in-process"


def vantage_point_in_process() -> VantagePoint:
    """The vantage point IN_PROCESS, for runs launched to be measured by the test itself."""
    return VantagePointFactory(name=IN_PROCESS)  # type: ignore[no-any-return]


class CampaignFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Campaign
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"campaign-{n}")
    methods = ["direct"]
    patterns = ["random"]
    read_sizes = [65536]
    fractions = [0.1]
    clients = [2]

    @factory.post_generation
    def endpoints(self, create: bool, extracted: list[Endpoint] | None) -> None:
        if create and extracted:
            self.endpoints.set(extracted)

    @factory.post_generation
    def vantage_points(self, create: bool, extracted: list[VantagePoint] | None) -> None:
        if create:
            self.vantage_points.set(extracted or [VantagePointFactory()])


class RunFactory(factory.django.DjangoModelFactory):
    """A queued run, created without enqueueing it (for tests that execute it themselves)."""

    class Meta:
        model = Run

    test_file = factory.SubFactory(TestFileFactory)
    endpoint = factory.LazyAttribute(lambda run: run.test_file.endpoint)
    campaign = factory.LazyAttribute(lambda run: CampaignFactory(endpoints=[run.endpoint]))
    vantage_point = factory.SubFactory(VantagePointFactory)
    method = "direct"
    pattern = "random"
    read_size = 65536
    fraction = 0.1
    clients = 2


class SeriesNightFactory(factory.django.DjangoModelFactory):
    """One night of a series: 4 succeeded runs, throughput median 100 MB/s."""

    class Meta:
        model = SeriesNight

    night = date(2026, 11, 1)
    endpoint = factory.SubFactory(EndpointFactory)
    vantage_point = factory.SubFactory(VantagePointFactory)
    method = "direct"
    pattern = "random"
    read_size = 65536
    fraction = 0.1
    clients = 2
    runs = 4
    succeeded = 4
    metrics = factory.LazyFunction(
        lambda: {"throughput_mbps": {"median": 100.0, "q1": 95.0, "q3": 105.0, "mad": 5.0, "n": 4}}
    )
    server_versions = factory.LazyFunction(lambda: ["v5.6.1"])
    client_versions = factory.LazyFunction(lambda: ["xrootd 5.6.1 (Python bindings)"])


class RegressionFactory(factory.django.DjangoModelFactory):
    """An open throughput regression of one series (endpoint, vantage point, parameter set),
    as the watch records it: a 40% drop confirmed on 2026-11-20."""

    class Meta:
        model = Regression

    endpoint = factory.SubFactory(EndpointFactory)
    vantage_point = factory.SubFactory(VantagePointFactory)
    key = factory.Sequence(lambda n: f"series-{n}:throughput_mbps")
    tier = Regression.Tier.SHIFT
    metric = "throughput_mbps"
    state = Regression.State.OPEN
    verdict = Regression.Verdict.REGRESSION
    severity = Regression.Severity.WARNING
    summary = "throughput down 40% since 2026-11-20"
    protocol = factory.LazyAttribute(lambda r: r.endpoint.protocol if r.endpoint else "")
    operation = "read"
    method = "direct"
    pattern = "random"
    read_size = 65536
    fraction = 0.1
    clients = 2
    address_family = "any"
    detector = factory.LazyFunction(
        lambda: {
            "name": "e-divisive",
            "parameters": {"pvalue": 0.01, "min_magnitude_pct": 10},
            "baseline_window": ["2026-10-25", "2026-11-19"],
            "target_window": ["2026-11-20", "2026-11-24"],
        }
    )
    blame = factory.LazyFunction(lambda: {"target": "site", "rule": "one series"})
    versions = factory.LazyFunction(list)
    change_night = date(2026, 11, 20)
    baseline = 100.0
    current = 60.0
    change_pct = -40.0
    last_night = date(2026, 11, 24)
    opened_at = factory.LazyFunction(lambda: datetime(2026, 11, 20, 6, 0, tzinfo=UTC))


def jwt(**claims: object) -> str:
    """A JWT with these claims (decodable, not verifiable: its signature is made up)."""

    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'ES256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJlLXMzY3JldA"


def proxy_pem(*, lifetime: timedelta = timedelta(hours=12), subject: str = "fedprobe user") -> str:
    """An X.509 proxy file's text (self-signed: only its form matters): certificate, key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + lifetime)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return (cert.public_bytes(serialization.Encoding.PEM) + key_pem).decode()


def proxy_key(pem: str) -> str:
    """The base64 body of a proxy's private key: what must never be shown."""
    body = pem.split("PRIVATE KEY-----", 1)[1].split("-----END", 1)[0]
    return "".join(body.split())[:48]


def oauth_client(
    *, token_url: str = "https://iam.example.org/token", secret: str = "cl1ent-s3cret-v4lue"
) -> dict[str, str]:
    return {
        "token_url": token_url,
        "client_id": "fedprobe-probe",
        "client_secret": secret,
        "scope": "storage.read:/",
        "audience": "https://wlcg.cern.ch/jwt/v1/any",
    }


def user(name: str, role: str = "operator") -> User:
    """A user named `name` with `role` (viewer, operator, admin)."""
    made = User.objects.create_user(name)
    user_set_role(user=made, role=role)
    return made


def member(name: str, role: str = "viewer", *, email: str = "") -> User:
    """A user of `role` with an email address (NAME@example.org unless given)."""
    made = user(name, role=role)
    made.email = email or f"{name}@example.org"
    made.save(update_fields=["email"])
    return made


def team(name: str, *, manager: User, members: Iterable[User] = ()) -> Team:
    """A team made by `manager` (an operator: its first manager), with `members` added."""
    made = team_create(name=name, by=manager)
    for each in members:
        team_member_add(team=made, by=manager, username=each.get_username())
    return made


def page_for(who: User) -> Client:
    """A browser-like client logged in as `who`."""
    page = Client()
    page.force_login(who)
    return page


def api_for(who: User) -> APIClient:
    """An API client authenticated as `who`."""
    api = APIClient()
    api.force_authenticate(who)
    return api
