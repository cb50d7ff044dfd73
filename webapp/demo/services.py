"""The lab in the database: its sites, endpoints, test files and credentials."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from webapp.sites.credentials import ca_dir_merge, trusted_ca_sources
from webapp.sites.models import Endpoint, Site, TestFile
from webapp.sites.services import vantage_point_local
from workers.engine.credentials import Credential, CredentialKind
from workers.engine.oauth import OAuthClient
from workers.lab import Lab


@dataclass(frozen=True)
class Registered:
    """What `lab register` recorded."""

    sites: int
    endpoints: int
    files: int


@transaction.atomic
def lab_register(*, lab: Lab, ca_dir: Path | None = None) -> Registered:
    """Record the running lab's sites, endpoints and test files (idempotent).

    Endpoints keep the lab's names (`far-root`, as `lab status` lists them); their sites are
    named `lab-<site>` (tier "lab"), which tells them apart from real ones. Each endpoint's
    largest file is its default test file. Authenticated endpoints get the
    lab's credentials: an oauth client of its issuer where a token is asked for (reading
    the test files, writing under the endpoint's scratch path), a fresh proxy of its CA where
    an X.509 proxy is; each its scratch path, where the lab has one.
    With `ca_dir`, that folder is made the CA folder of this host plus the lab's CA
    (settings.LOCAL_CA_DIR: the embedded mode's).
    """
    sites, endpoints, files = set(), 0, 0
    for lab_endpoint in lab.endpoints():
        site, _ = Site.objects.update_or_create(
            name=f"lab-{lab_endpoint.site}",
            defaults={"tier": "lab", "storage_system": "xrootd", "location": "loopback"},
        )
        sites.add(site.pk)
        kind, credential = _lab_credential(lab, lab_endpoint.auth, lab_endpoint.scratch_path)
        endpoint, _ = Endpoint.objects.update_or_create(
            name=lab_endpoint.name,
            defaults={
                "site": site,
                "protocol": lab_endpoint.protocol,
                "base_url": lab_endpoint.url,
                "role": lab_endpoint.role,
                "enabled": True,
                "credential_kind": kind,
                "credential": credential,
                # Where the lab lets writes go (`lab status --json`'s scratch_path); none
                # (the federation, the cache): the endpoint takes no writes.
                "scratch_path": lab_endpoint.scratch_path or "",
            },
        )
        endpoints += 1
        largest = max(lab_endpoint.files, key=lambda f: f.size).path if lab_endpoint.files else ""
        for lab_file in lab_endpoint.files:
            TestFile.objects.update_or_create(
                endpoint=endpoint,
                path=lab_file.path,
                defaults={
                    "size": lab_file.size,
                    "adler32": lab_file.adler32,
                    "is_default": lab_file.path == largest,
                },
            )
            files += 1
    vantage_point_local()
    if ca_dir is not None:
        ca_dir_merge(target=ca_dir, sources=[trusted_ca_sources(), lab.ca_dir()])
    return Registered(len(sites), endpoints, files)


def _lab_credential(lab: Lab, auth: str, scratch_path: str | None) -> tuple[str, str]:
    """The credential kind and text a lab endpoint asking for `auth` is given: a token door
    an oauth client whose tokens read the test files and write under its own site's scratch
    folder (campaigns that write or copy there pass the scope check at save), never another
    site's (a copy hands the source's token to the other side)."""
    if auth == "token":
        client = OAuthClient.from_json(json.dumps(lab.oauth_client(scratch_path=scratch_path)))
        return CredentialKind.OAUTH_CLIENT, client.to_json()
    if auth == "x509":
        proxy = lab.write_proxy()
        return CredentialKind.X509_PROXY, Credential.x509_proxy(proxy.read_text()).secret
    return CredentialKind.NONE, ""
