"""`manage.py history synthesize|clear`: synthetic measurement history for demos and
benchmarks (webapp/demo/synthetic.py)."""

from __future__ import annotations

import json
import time
from argparse import ArgumentParser, ArgumentTypeError, BooleanOptionalAction
from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from webapp.demo.synthetic import (
    MAX_PARAMETER_SETS,
    SYNTHETIC_PREFIX,
    history_clear,
    history_exists,
    history_synthesize,
)


def _bounded(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise ArgumentTypeError(f"must be between {low} and {high}")
        return value

    return parse


def _night(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


class Command(BaseCommand):
    help = (
        "Make (synthesize) or remove (clear) synthetic measurement history: sites, endpoints, "
        f"nightly campaigns and their finished runs, all named {SYNTHETIC_PREFIX}*."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        make = actions.add_parser(
            "synthesize",
            help="make the history (runs per night, endpoint, parameter set and vantage point)",
        )
        make.add_argument("--endpoints", type=_bounded(1, 2000), default=100)
        make.add_argument("--parameter-sets", type=_bounded(1, MAX_PARAMETER_SETS), default=10)
        make.add_argument("--nights", type=_bounded(1, 3660), default=365)
        make.add_argument("--vantage-points", type=_bounded(1, 20), default=1)
        make.add_argument(
            "--repetitions", type=_bounded(1, 10), default=1, help="runs per night and cell"
        )
        make.add_argument("--seed", type=int, default=1)
        make.add_argument(
            "--last-night",
            type=_night,
            default=None,
            help="date of the last night (default: the latest 02:00 UTC that has passed)",
        )
        make.add_argument(
            "--clear", action="store_true", help="remove the synthetic history there is first"
        )
        make.add_argument(
            "--plant",
            action=BooleanOptionalAction,
            default=True,
            help="plant the watch's test changes (steps, drifts, bad nights, outages...) in "
            "histories of 45 nights or more (webapp/demo/planted.py)",
        )
        make.add_argument(
            "--truth",
            type=Path,
            default=None,
            metavar="FILE",
            help="write the ground truth (every planted change) to FILE as JSON",
        )
        actions.add_parser("clear", help=f"remove every {SYNTHETIC_PREFIX}* row")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "clear":
            self._clear()
            return
        if history_exists():
            if not options["clear"]:
                raise CommandError(
                    "synthetic history exists: pass --clear to replace it (or run `history clear`)"
                )
            self._clear()
        self._synthesize(options)

    def _clear(self) -> None:
        started = time.monotonic()
        runs = history_clear()
        self.stdout.write(f"cleared the synthetic history: {runs} runs ({_took(started)})")

    def _synthesize(self, options: dict[str, Any]) -> None:
        started = time.monotonic()
        shown = [0.0]
        # On a terminal one line rewritten in place; in a log, a line every 10 seconds.
        terminal = self.stderr.isatty()
        every_s = 2.0 if terminal else 10.0

        def progress(done: int, total: int) -> None:
            if time.monotonic() - shown[0] >= every_s or done == total:
                shown[0] = time.monotonic()
                text = f"{done:,} of {total:,} runs ({_took(started)})"
                if terminal:
                    self.stderr.write(f"\r{text}", ending="")
                else:
                    self.stderr.write(text)
                self.stderr.flush()

        made = history_synthesize(
            endpoints=options["endpoints"],
            parameter_sets=options["parameter_sets"],
            nights=options["nights"],
            vantage_points=options["vantage_points"],
            repetitions=options["repetitions"],
            seed=options["seed"],
            last_night=options["last_night"],
            progress=progress,
            plant=options["plant"],
        )
        if options["truth"]:
            options["truth"].write_text(json.dumps(made.truth, indent=1) + "\n")
        if terminal:
            self.stderr.write("")  # end the line rewritten in place
        _vacuum()
        self.stdout.write(
            f"synthesized {made.runs:,} runs from {made.first_night} to {made.last_night}: "
            f"{made.sites} sites, {made.endpoints} endpoints (disabled: their nightly "
            f"campaigns launch nothing), {made.vantage_points} vantage points, "
            f"{made.campaigns} campaigns ({_took(started)})"
        )


def _vacuum() -> None:
    """Fresh statistics and visibility map, so the dashboards' index-only scans work at once
    rather than after autovacuum's next pass."""
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        from webapp.campaigns.models import Run

        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {Run._meta.db_table}")


def _took(started: float) -> str:
    return f"{time.monotonic() - started:.1f} s"
