"""factory_boy factories for the web application's models."""

from __future__ import annotations

import factory

from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint


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
