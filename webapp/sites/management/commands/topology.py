"""`manage.py topology import gocdb|cric FILE_OR_URL... [--dry-run]`: sites and their storage
doors from GOCDB's programmatic interface (get_site, get_service_endpoint XML) or CRIC's
storage services (JSON), shown as a plan, then applied in one transaction
(docs/topology.md)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.sites.management.registry_options import (
    add_source_arguments,
    client_credential,
    plan_show_and_apply,
)
from webapp.sites.registry_formats import RegistryRefused
from webapp.sites.topology import topology_apply, topology_plan, topology_read


class Command(BaseCommand):
    help = "Import sites and endpoints from GOCDB or CRIC (shows the plan first)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add_source_arguments(
            actions.add_parser("import", help="import sites and endpoints"),
            formats=["gocdb", "cric"],
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            topology = topology_read(
                source=options["format"],
                locations=options["locations"],
                **client_credential(options),
            )
            plan = topology_plan(source=options["format"], topology=topology)
        except RegistryRefused as exc:
            raise CommandError(f"{exc}; nothing changed") from None
        plan_show_and_apply(plan, dry_run=options["dry_run"], apply=topology_apply, out=self.stdout)
