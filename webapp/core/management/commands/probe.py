"""`manage.py probe URL [options]`: one measurement run from this host (see workers.engine.cli)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any, NoReturn, TextIO, cast

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workers.engine.cli import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    add_probe_arguments,
    execute,
    nagios_probe,
    params_from_options,
    warn_unreachable_fraction,
)
from workers.engine.errors import InvalidParams
from workers.engine.nagios import unknown
from workers.engine.plugin import State


class Command(BaseCommand):
    help = "Measure reads of a file from an endpoint: N clients, one method and pattern."

    nagios = False

    def run_from_argv(self, argv: list[str]) -> None:
        self.nagios = "--nagios" in argv
        super().run_from_argv(argv)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if self.nagios:
            # A plugin's bad arguments are UNKNOWN (argparse's exit 2 is CRITICAL to a core).
            parser.error = _plugin_error  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_probe_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["adler32"] is None:
            options["adler32"] = lab_checksum(options["urls"])
        if options["ca_dir"] is None:
            # The workers' CA folder (in the embedded mode: the host's CAs and the lab's).
            options["ca_dir"] = settings.FEDPROBE_CA_DIR
        if options["nagios"]:
            # A monitoring plugin: one status line on stdout, exit 0/1/2/3.
            verdict = nagios_probe(options)
            self.stdout.write(verdict.line)
            sys.exit(int(verdict.state))
        if options["warning"] is not None or options["critical"] is not None:
            raise CommandError("--warning and --critical need --nagios", returncode=EXIT_BAD_INPUT)
        try:
            params = params_from_options(options)
        except InvalidParams as exc:
            raise CommandError(f"{exc.field}: {exc.message}", returncode=2) from None
        warn_unreachable_fraction(params, sys.stderr)
        # self.stdout (a TextIOBase) is what call_command(stdout=...) captures.
        out = cast(TextIO, self.stdout)
        status = execute(params, as_json=options["json"], out=out, err=sys.stderr)
        if status != EXIT_OK:
            sys.exit(status)


def _plugin_error(message: str) -> NoReturn:
    sys.stdout.write(unknown(message).line + "\n")
    sys.exit(State.UNKNOWN)


def lab_checksum(urls: list[str]) -> str | None:
    """The adler32 of a file of the running lab, when every URL names that same file."""
    from workers.lab import Lab, LabError

    lab = Lab(settings.FEDPROBE_LAB_DIR)
    try:
        if not lab.is_running():
            return None
        known = {
            endpoint.file_url(f.path): f.adler32
            for endpoint in lab.endpoints()
            for f in endpoint.files
        }
    except LabError:
        return None
    checksums = {known.get(url) for url in urls}
    return checksums.pop() if len(checksums) == 1 else None
