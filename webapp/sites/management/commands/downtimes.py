"""`manage.py downtimes import gocdb FILE_OR_URL... [--dry-run]`: GOCDB's downtimes
(get_downtime or get_downtime_nested_services XML) of the endpoints here, shown as a plan,
then applied in one transaction (docs/topology.md "Downtimes"). Give the whole feed of
ongoing and future downtimes: one imported earlier that is not in it any more ends now."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from webapp.sites.downtime_import import downtimes_apply, downtimes_plan, downtimes_read
from webapp.sites.management.registry_options import (
    add_source_arguments,
    client_credential,
    plan_show_and_apply,
)
from webapp.sites.registry_formats import RegistryRefused


class Command(BaseCommand):
    help = "Import GOCDB's downtimes of the endpoints here (shows the plan first)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add_source_arguments(
            actions.add_parser("import", help="import downtimes"), formats=["gocdb"]
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            downtimes = downtimes_read(locations=options["locations"], **client_credential(options))
            plan = downtimes_plan(downtimes=downtimes, now=timezone.now())
        except RegistryRefused as exc:
            raise CommandError(f"{exc}; nothing changed") from None
        plan_show_and_apply(
            plan, dry_run=options["dry_run"], apply=downtimes_apply, out=self.stdout
        )
