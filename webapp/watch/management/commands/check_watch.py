"""`manage.py check_watch --site NAME|--endpoint ID|--vantage-point NAME [--warning RANGE]
[--critical RANGE]`: the watch's verdict on one target as a monitoring plugin (one status line,
exit 0/1/2/3; webapp/watch/plugin.py, docs/monitoring-probes.md)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from webapp.watch.plugin import SERVICE, target_find, watch_verdict
from workers.engine.plugin import (
    BadThreshold,
    State,
    Thresholds,
    merge_thresholds,
    parse_thresholds,
    status_line,
)

AVAILABILITY = {"availability": "availability"}


def _unknown(message: str) -> NoReturn:
    """Bad arguments are the tester's fault: UNKNOWN, one line naming the option."""
    sys.stdout.write(status_line(SERVICE, State.UNKNOWN, message) + "\n")
    sys.exit(State.UNKNOWN)


class Command(BaseCommand):
    help = "The watch's verdict on a site, endpoint or vantage point, as a Nagios plugin."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # argparse's own errors (an unknown option) would exit 2, CRITICAL to a monitoring
        # core: a plugin's bad arguments are UNKNOWN.
        parser.error = _unknown  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--site", metavar="NAME", help="a site, by name")
        target.add_argument("--endpoint", metavar="ID", help="an endpoint, by id")
        target.add_argument("--vantage-point", metavar="NAME", help="a vantage point, by name")
        for flag in ("warning", "critical"):
            parser.add_argument(
                f"-{flag[0]}",
                f"--{flag}",
                metavar="RANGE",
                help=f"{flag.upper()} when this month's availability (%%) is outside RANGE "
                "(99:, 95:100, @0:50: the plugin guidelines' syntax; availability=RANGE too)",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            thresholds = _thresholds(options["warning"], options["critical"])
            target = target_find(
                site=options["site"],
                endpoint=options["endpoint"],
                vantage_point=options["vantage_point"],
            )
            verdict = watch_verdict(target=target, thresholds=thresholds, now=timezone.now())
        except (BadThreshold, LookupError) as exc:
            _unknown(str(exc))
        except Exception as exc:
            # The database down is our fault, not the target's: UNKNOWN (a traceback would exit
            # 1, WARNING to a core), saying what failed in the exception's first line.
            first = next(iter(str(exc).splitlines()), "")
            _unknown(f"the watch cannot be asked: {type(exc).__name__}: {first}")
        self.stdout.write(verdict.line)
        sys.exit(int(verdict.state))


def _thresholds(warning: str | None, critical: str | None) -> Thresholds:
    def ranges(text: str | None, flag: str) -> dict[str, Any]:
        if not text:  # a monitoring core's macro left empty: no threshold
            return {}
        return parse_thresholds(text, flag=flag, metrics=AVAILABILITY, default="availability")

    merged = merge_thresholds(ranges(warning, "--warning"), ranges(critical, "--critical"))
    return merged.get("availability", Thresholds())
