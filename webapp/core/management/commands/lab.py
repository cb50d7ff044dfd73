"""`manage.py lab up|down|status`: the lab federation (see workers.lab.cli)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from workers.lab.cli import add_lab_arguments, run_lab_command


class Command(BaseCommand):
    help = "Start, stop or show the lab federation: real servers on loopback behind relays."

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_lab_arguments(parser, default_dir=Path(settings.FEDPROBE_LAB_DIR))

    def handle(self, *args: Any, **options: Any) -> None:
        status = run_lab_command(options, out=self.stdout, err=self.stderr)
        if status:
            sys.exit(status)
