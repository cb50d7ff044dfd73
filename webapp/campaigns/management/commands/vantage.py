"""`manage.py vantage enrol NAME | revoke NAME | list`: remote vantage points' agents
(docs/vantage-points.md).

`enrol` prints a one-time enrolment token (valid 24 hours) and the command to run on the
remote host with it; the token is printed once, never stored in the clear. `revoke` ends the
agent's token and broker account and the vantage point's queued and running runs.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from webapp.campaigns.agents import vantage_point_revoke
from webapp.sites import broker_accounts
from webapp.sites.broker_accounts import BrokerAccountsUnavailable
from webapp.sites.enrolment import ENROLMENT_TOKEN_LIFETIME, vantage_enrolment_start
from webapp.sites.models import VantagePoint
from workers.agent.sealing import fingerprint
from workers.engine.errors import InvalidParams


class Command(BaseCommand):
    help = "Enrol, revoke or list the agents of remote vantage points."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        enrol = actions.add_parser("enrol", help="print a one-time enrolment token for NAME")
        enrol.add_argument("name")
        revoke = actions.add_parser("revoke", help="revoke NAME's agent and end its runs")
        revoke.add_argument("name")
        actions.add_parser("list", help="the vantage points and their agents")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "enrol":
            self._enrol(options["name"])
        elif action == "revoke":
            self._revoke(options["name"])
        else:
            self._list()

    def _enrol(self, name: str) -> None:
        why = broker_accounts.configured()
        if why is not None:
            raise CommandError(why)
        try:
            vantage_point, token = vantage_enrolment_start(name=name, now=timezone.now())
        except InvalidParams as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        hours = int(ENROLMENT_TOKEN_LIFETIME.total_seconds() // 3600)
        self.stdout.write(token)
        self.stderr.write(
            f"Enrolment token for {vantage_point.name} (once, within {hours} hours). On the "
            "remote host:\n"
            f"  python -m workers.agent enrol {settings.FEDPROBE_BASE_URL} TOKEN\n"
            "then `python -m workers.agent run` there."
        )

    def _revoke(self, name: str) -> None:
        vantage_point = VantagePoint.objects.filter(name=name).first()
        if vantage_point is None:
            raise CommandError(f"no vantage point named {name!r}")
        if not vantage_point.is_remote:
            raise CommandError(f"{name} has no enrolled agent to revoke")
        try:
            ended = vantage_point_revoke(vantage_point=vantage_point)
        except BrokerAccountsUnavailable as exc:
            raise CommandError(
                f"{name} is revoked (its agent token no longer works, its runs ended) but its "
                f"broker account could not be deleted: {exc}. Run this again to retry."
            ) from None
        self.stdout.write(f"{name} revoked; {ended} of its runs ended")

    def _list(self) -> None:
        for vantage_point in VantagePoint.objects.order_by("name"):
            if vantage_point.is_revoked:
                state = f"revoked {vantage_point.revoked_at:%Y-%m-%d %H:%M}"
            elif vantage_point.is_remote:
                state = f"enrolled {vantage_point.enrolled_at:%Y-%m-%d %H:%M}"
            elif vantage_point.enrolment_expires_at is not None:
                state = "enrolment pending"
            else:
                state = "workers of this deployment"
            key = fingerprint(vantage_point.public_key) if vantage_point.public_key else "-"
            self.stdout.write(f"{vantage_point.name}\t{state}\t{key}")
