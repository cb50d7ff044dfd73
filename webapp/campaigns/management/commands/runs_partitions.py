"""`manage.py runs_partitions [--ahead N] [--detach YYYY-MM]`: on a runs table partitioned by
month (docs/deployment.md, "Hourly probes: the runs table by month"), create this month's and
the next months' partitions, or detach an old month to archive it."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from datetime import date, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from webapp.campaigns.partitions import (
    MONTHS_AHEAD,
    NotPartitioned,
    runs_partition_detach,
    runs_partitions,
    runs_partitions_create,
)

MAX_AHEAD = 24


def _month(text: str) -> date:
    try:
        return datetime.strptime(text, "%Y-%m").date()
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a month (YYYY-MM)") from None


def _ahead(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_AHEAD:
        raise ArgumentTypeError(f"{text!r} is not a number of months from 0 to {MAX_AHEAD}")
    return int(text)


class Command(BaseCommand):
    help = (
        "Create the partitioned runs table's partitions of this month and the next ones "
        "(a no-op for those that exist), or detach one month's."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--ahead",
            type=_ahead,
            default=MONTHS_AHEAD,
            help=f"months after this one to create (default {MONTHS_AHEAD})",
        )
        parser.add_argument(
            "--detach",
            type=_month,
            metavar="YYYY-MM",
            default=None,
            help="detach this month's partition instead (it stays a table, to dump and drop)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["detach"]:
                name = runs_partition_detach(month=options["detach"])
                self.stdout.write(f"detached {name}: dump it (pg_dump -t {name}), then drop it")
                return
            created = runs_partitions_create(now=timezone.now(), ahead=options["ahead"])
        except NotPartitioned as error:
            raise CommandError(
                f"{error}: nothing to do (docs/deployment.md, 'Hourly probes: the runs table "
                "by month', says how to convert it)"
            ) from error
        except ValueError as error:
            raise CommandError(str(error)) from error
        names = ", ".join(p.name for p in created) or "none (all there)"
        self.stdout.write(f"created: {names}; partitions: {len(runs_partitions())}")
