"""`manage.py archivers list|test NAME|backfill NAME --since TIME` (docs/archivers.md)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from webapp.archivers.channels import archive_send
from webapp.archivers.models import Archiver
from webapp.archivers.selectors import backlog
from webapp.archivers.services import archiver_backfill
from webapp.notifications.channels import DeliveryError


class Command(BaseCommand):
    help = (
        "List the archivers with their backlog, send one a test message, or push it the runs "
        "finished since a time (backfill)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="each archiver, where it sends, its backlog")
        test = actions.add_parser("test", help="send NAME a test message and say how it went")
        test.add_argument("name")
        backfill = actions.add_parser("backfill", help="push NAME the runs finished since TIME")
        backfill.add_argument("name")
        backfill.add_argument(
            "--since", required=True, help="ISO date or time (UTC if no zone): 2026-11-01"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        match options["action"]:
            case "list":
                self._list()
            case "test":
                self._test(_archiver(options["name"]))
            case _:
                self._backfill(_archiver(options["name"]), _since(options["since"]))

    def _list(self) -> None:
        archivers = {a.name: a for a in Archiver.objects.all()}
        for row in backlog():
            archiver = archivers.get(row.name)
            if archiver is None:  # made between the two reads: the next list shows it
                continue
            oldest = f"{row.oldest_pending_s:.0f} s" if row.oldest_pending_s is not None else "-"
            where = archiver.url + (f" exchange {archiver.exchange!r}" if archiver.exchange else "")
            self.stdout.write(
                f"{row.name}\t{row.kind}\t{'enabled' if row.enabled else 'paused'}\t{where}\t"
                f"pending {row.pending} (oldest {oldest})\tfailed {row.failed}"
            )

    def _test(self, archiver: Archiver) -> None:
        key = f"fedprobe-test-{uuid.uuid4()}"
        body: dict[str, object] = {
            "kind": "fedprobe.test",
            "version": 1,
            "delivery_id": key,
            "archiver": archiver.name,
            "sent_at": timezone.now().isoformat(),
        }
        started = time.monotonic()
        try:
            archive_send(archiver=archiver, body=body, key=key)
        except DeliveryError as exc:
            raise CommandError(f"{archiver.name}: not delivered: {exc}") from None
        elapsed = time.monotonic() - started
        self.stdout.write(f"{archiver.name}: delivered ({key}) in {elapsed:.2f} s")

    def _backfill(self, archiver: Archiver, since: datetime) -> None:
        archiver_backfill(archiver=archiver, since=since)
        self.stdout.write(
            f"{archiver.name}: the runs finished since {since.isoformat()} not yet pushed to it "
            "will be, oldest first, by the next passes of the pump"
        )


def _archiver(name: str) -> Archiver:
    try:
        return Archiver.objects.get(name=name)
    except Archiver.DoesNotExist:
        names = ", ".join(Archiver.objects.values_list("name", flat=True)) or "none"
        raise CommandError(f"no archiver named {name} (there are: {names})") from None


def _since(text: str) -> datetime:
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"--since: not an ISO date or time: {text}")
        moment = datetime(day.year, day.month, day.day)
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    return moment
