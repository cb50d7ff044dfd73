"""`manage.py lab up|down|status|token|proxy|register`: the lab federation (see workers.lab.cli)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from webapp.demo.services import lab_register
from webapp.sites.services import local_ca_dir
from workers.lab import Lab, LabError
from workers.lab.cli import LAB_ACTIONS, add_lab_arguments, run_lab_command


class Command(BaseCommand):
    help = (
        "Start, stop or show the lab federation (real servers on loopback behind relays), "
        "print a token of its issuer or write an X.509 proxy of its CA, "
        "or register its endpoints in the database."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_lab_arguments(
            parser, default_dir=Path(settings.FEDPROBE_LAB_DIR), actions=(*LAB_ACTIONS, "register")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "register":
            self.register(Path(options["dir"]))
            return
        status = run_lab_command(options, out=self.stdout, err=self.stderr)
        if status:
            sys.exit(status)

    def register(self, lab_dir: Path) -> None:
        lab = Lab(lab_dir)
        try:
            registered = lab_register(lab=lab, ca_dir=local_ca_dir())
        except LabError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"registered the lab in {lab_dir}: {registered.sites} sites, "
            f"{registered.endpoints} endpoints, {registered.files} test files; "
            f"CA folder {local_ca_dir()} (the host's CAs and the lab's)"
        )
