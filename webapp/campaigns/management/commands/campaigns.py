"""`manage.py campaigns export [NAME...]` and `manage.py campaigns import FILE [--dry-run]`:
campaigns, and the sites, endpoints and vantage points they use, as one YAML file
(docs/configuration-as-code.md).

The command line administers the deployment: an import may change anything, and what it
creates has no owner (admins' rows); `--as USERNAME` imports with that user's rights instead,
and what it creates is theirs.
"""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.campaigns.configuration.export import configuration_export
from webapp.campaigns.configuration.importing import configuration_import
from webapp.campaigns.models import Campaign


class Command(BaseCommand):
    help = "Export campaigns (with their sites, endpoints and vantage points) as YAML, or import."
    stealth_options = ("stdin",)  # what `import -` reads (call_command(..., stdin=...))

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        export = actions.add_parser(
            "export", help="write the named campaigns (all, and everything else, if none)"
        )
        export.add_argument("names", nargs="*", metavar="NAME")
        imported = actions.add_parser("import", help="validate FILE whole, then apply it")
        imported.add_argument("file", metavar="FILE", help="a YAML file, or - for stdin")
        imported.add_argument(
            "--dry-run", action="store_true", help="show the plan, change nothing"
        )
        imported.add_argument(
            "--as",
            dest="username",
            metavar="USERNAME",
            help="with this user's rights (else the command line's: everything)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "export":
            self._export(options["names"])
        else:
            stdin: IO[str] = options.get("stdin") or sys.stdin
            self._import(
                options["file"],
                dry_run=options["dry_run"],
                username=options["username"],
                stdin=stdin,
            )

    def _export(self, names: list[str]) -> None:
        if not names:
            self.stdout.write(configuration_export(), ending="")
            return
        campaigns = list(Campaign.objects.filter(name__in=names))
        missing = sorted(set(names) - {campaign.name for campaign in campaigns})
        if missing:
            raise CommandError(f"no campaign named {', '.join(missing)}")
        self.stdout.write(configuration_export(campaigns=campaigns), ending="")

    def _import(self, file: str, *, dry_run: bool, username: str | None, stdin: IO[str]) -> None:
        user = None
        if username is not None:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}")
        try:
            text = stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        outcome = configuration_import(text=text, as_user=user, dry_run=dry_run)
        for step in outcome.plan:
            self.stdout.write(step.text())
        if outcome.errors:
            for error in outcome.errors:
                self.stderr.write(error.text(file))
            raise CommandError(f"{len(outcome.errors)} errors: nothing changed")
        counts = ", ".join(f"{n} {action}" for action, n in outcome.counts().items())
        verdict = "dry run, nothing changed" if dry_run else "applied"
        self.stdout.write(f"{verdict}: {counts}")
