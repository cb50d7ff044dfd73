"""`manage.py watch [--now ISO]`: one pass of the watch (webapp/watch/evaluate.py), printing
what changed. Beat runs the same pass as the task fedprobe.watch."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from webapp.watch.evaluate import watch_evaluate


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not an ISO date and time") from None
    return moment.replace(tzinfo=UTC) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = "Run one pass of the watch: roll up new nights, evaluate the series, blame groups."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--now", type=_moment, default=None, help="evaluate as of this time (UTC if naive)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = watch_evaluate(now=options["now"] or timezone.now())
        if outcome.skipped:
            self.stdout.write("another pass of the watch is running: nothing done")
            return
        nights = ", ".join(n.isoformat() for n in outcome.evaluated) or "none"
        self.stdout.write(
            f"rolled up {len(outcome.nights)} nights; evaluated {outcome.series} series on "
            f"{nights}; {len(outcome.changes)} changes"
        )
        phases = ", ".join(f"{name} {s:.1f} s" for name, s in outcome.phases.items())
        self.stdout.write(f"took {sum(outcome.phases.values()):.1f} s ({phases})")
        if outcome.backfilled:
            self.stdout.write(
                f"rolled up {len(outcome.backfilled)} older nights "
                f"({outcome.backfilled[0]} to {outcome.backfilled[-1]})"
            )
        if outcome.backfill_before:
            self.stdout.write(
                f"the nights before {outcome.backfill_before} are still rolling up "
                "(the next passes go on)"
            )
        for change in outcome.changes:
            self.stdout.write(f"  {change}")
