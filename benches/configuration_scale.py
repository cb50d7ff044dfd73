"""Configuration as code at WLCG scale: import, re-import (all unchanged), dry run, export and
a re-import of the export of one file with 150 sites, 600 endpoints, 1800 test files, 20
vantage points and 200 campaigns, and whether export, import into an empty database, export
gives the same bytes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_bench_config \
        .venv/bin/python benches/configuration_scale.py [--sites 150] [--campaigns 200]

Uses a database of its own (benches/django_bench.py): it deletes every campaign, site and
vantage point there first.
"""

from __future__ import annotations

import argparse
import time

from django_bench import setup_django

PROTOCOLS = (("root", "root://{host}:1094/"), ("https", "https://{host}:443/"))


def make_file(*, sites: int, campaigns: int) -> str:
    from webapp.campaigns.configuration.documents import canonical_yaml

    vantage_points = [{"name": f"vp-{n:02}", "max_parallel_runs": 4} for n in range(20)]
    site_docs = []
    for s in range(sites):
        endpoints = []
        for e in range(4):
            protocol, url = PROTOCOLS[e % 2]
            files = [
                {"path": f"/data/file-{f}", "size": 2**20 << f, "is_default": f == 0}
                for f in range(3)
            ]
            endpoints.append(
                {
                    "name": f"site-{s:03}-{e}",
                    "protocol": protocol,
                    "base_url": url.format(host=f"se{e}.site{s:03}.example.org"),
                    "test_files": files,
                }
            )
        site_docs.append({"name": f"SITE-{s:03}", "tier": f"T{1 + s % 3}", "endpoints": endpoints})
    campaign_docs = [
        {
            "name": f"campaign-{c:03}",
            "endpoints": [{"site": f"SITE-{c % sites:03}"}],
            "vantage_points": [f"vp-{c % 20:02}"],
            "parameters": {
                "methods": ["direct"],
                "patterns": ["sequential", "random"],
                "read_sizes": ["64k", "1M"],
                "fractions": [0.1, 1],
                "clients": [1, 4],
            },
            "schedule": "0 2 * * *",
        }
        for c in range(campaigns)
    ]
    return canonical_yaml(
        {
            "version": 1,
            "vantage_points": vantage_points,
            "sites": site_docs,
            "campaigns": campaign_docs,
        }
    )


def forget_everything() -> None:
    from webapp.campaigns.models import Campaign
    from webapp.sites.models import Site, VantagePoint

    Campaign.objects.all().delete()
    Site.objects.all().delete()
    VantagePoint.objects.all().delete()


def timed(label: str, work):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = work()
    print(f"{label}: {time.perf_counter() - started:.2f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sites", type=int, default=150)
    parser.add_argument("--campaigns", type=int, default=200)
    args = parser.parse_args()
    setup_django()
    from webapp.campaigns.configuration.export import configuration_export
    from webapp.campaigns.configuration.importing import configuration_import

    forget_everything()
    text = make_file(sites=args.sites, campaigns=args.campaigns)
    print(f"file: {len(text.splitlines())} lines, {len(text) / 1e6:.2f} MB")

    def load(dry_run: bool):  # type: ignore[no-untyped-def]
        return configuration_import(text=text, as_user=None, dry_run=dry_run)

    dry = timed("dry run into an empty database", lambda: load(True))
    first = timed("import into an empty database", lambda: load(False))
    assert not first.errors, first.errors[:3]
    print(f"  plan: {first.counts()}")
    again = timed("the same import again (each object's form asked)", lambda: load(False))
    print(f"  plan: {again.counts()}")
    assert again.counts()["create"] == again.counts()["update"] == 0
    assert dry.counts() == first.counts()
    exported = timed("export of everything", configuration_export)
    same = timed(
        "import of that export (as export writes it: no form asked)",
        lambda: configuration_import(text=exported, as_user=None, dry_run=False),
    )
    print(f"  plan: {same.counts()}")
    forget_everything()
    second = configuration_import(text=exported, as_user=None, dry_run=False)
    assert not second.errors
    print(
        f"export, import into an empty database, export: byte-identical "
        f"{configuration_export() == exported}"
    )


if __name__ == "__main__":
    main()
