"""What `manage.py topology import` and `downtimes import` share: their options, and how a
plan is shown and applied."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import OutputWrapper

from webapp.sites.topology import ImportPlan


def add_source_arguments(parser: ArgumentParser, *, formats: list[str]) -> None:
    parser.add_argument("format", choices=formats, help="the registry the documents come from")
    parser.add_argument(
        "locations",
        nargs="+",
        metavar="FILE_OR_URL",
        help="a saved answer of the registry, or its http(s) URL (fetched within the egress "
        "policy)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would change, change nothing"
    )
    parser.add_argument(
        "--cert",
        default=None,
        metavar="FILE",
        help="PEM file with an X.509 client certificate (and its key) to present to the "
        "registry (default FEDPROBE_REGISTRY_CERT)",
    )
    parser.add_argument(
        "--key", default=None, metavar="FILE", help="its key, if apart (FEDPROBE_REGISTRY_KEY)"
    )


def client_credential(options: dict[str, Any]) -> dict[str, str]:
    """The client certificate's paths (never their contents) from options or settings.
    A --cert is paired with --key only: its file holds its key unless --key is given, and
    the settings' key belongs to the settings' certificate."""
    if options["cert"]:
        return {"client_cert": options["cert"], "client_key": options["key"] or ""}
    return {
        "client_cert": settings.FEDPROBE_REGISTRY_CERT,
        "client_key": options["key"] or settings.FEDPROBE_REGISTRY_KEY,
    }


def plan_show_and_apply(
    plan: ImportPlan, *, dry_run: bool, apply: Callable[[Any], None], out: OutputWrapper
) -> None:
    """Print the plan, then apply it (in one transaction) unless it is a dry run."""
    for line in plan.lines:
        out.write(line)
    out.write(f"plan: {plan.summary or 'nothing'}")
    if dry_run:
        out.write("dry run: nothing changed")
    elif not plan.changes_anything:
        out.write("nothing to change")
    else:
        apply(plan)
        out.write("applied")
