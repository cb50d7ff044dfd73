"""Third-party copies (tpc-pull, tpc-push): one client's copies between two endpoints.

Each client copies its sources (RunParams.client_urls) to
`<destination>/fedprobe-<run_tag>-c<client>-f<k>`, asks the destination for the copy's
adler32 and compares it with the source's, then deletes the copy: always, also when the
copy or the check failed (a client killed mid-copy cannot: the driver sweeps the
destination after it, driver.py). The bytes never pass through us: the servers move them, we time
the COPY (HTTP-TPC, backends/http_tpc.py) or XRootD's own TPC (backends/xroot_tpc.py).
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import TYPE_CHECKING

from workers.engine.backends import backend_for
from workers.engine.backends.base import OpenOptions
from workers.engine.backends.http_tpc import CopyStream, Sides, http_delete, http_third_party_copy
from workers.engine.backends.xroot_tpc import xroot_delete, xroot_third_party_copy
from workers.engine.credentials import Access
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.metrics import TpcRecord
from workers.engine.params import Operation
from workers.engine.urls import HTTP_SCHEMES

if TYPE_CHECKING:
    from workers.engine.client import Client, FileTarget


def copy_name(run_tag: str, client: int, k: int) -> str:
    """The name of client `client`'s copy of its file `k` (shared with writes)."""
    return f"fedprobe-{run_tag}-c{client}-f{k}"


class ThirdPartyCopies:
    """The copies of one client, timed on its clock."""

    def __init__(self, client: Client) -> None:
        self.client = client
        params = client.params
        assert params.destination is not None  # RunParams.validate
        self.pull = params.operation == Operation.TPC_PULL
        self.http = params.scheme in HTTP_SCHEMES
        self.directory = params.destination.rstrip("/")
        # The CLI and the webapp name their runs; a bare engine call still names its copies.
        self.run_tag = params.run_tag or secrets.token_hex(4)
        source_access = client.spec.access
        destination_access = source_access.destination or Access(ca_dir=source_access.ca_dir)
        self.source_access, self.destination_access = source_access, destination_access
        self.record = TpcRecord("http" if self.http else "root", "", self.directory)
        client.result.tpc = self.record

    def options(self, access: Access) -> OpenOptions:
        return replace(self.client.options, access=access)

    def run(self) -> None:
        for target in self.client.spec.targets:
            self.copy(target)

    def copy(self, target: FileTarget) -> None:
        client = self.client
        name = copy_name(self.run_tag, client.spec.client, target.index)
        destination = f"{self.directory}/{name}"
        self.record.source, self.record.destination = target.url, destination
        expected = client.expected_adler32.get(target.url) or self.source_adler32(target.url)
        client.result.bytes_requested += target.size
        copied = False
        try:
            self.transfer(target, destination)
            copied = True
            self.verify(destination, expected)
            client.result.files_done += 1
        finally:
            self.delete(destination, quiet=not copied)

    def source_adler32(self, url: str) -> str | None:
        """What the source says its file's adler32 is (asked before the copy's clock)."""
        backend = backend_for(self.client.params.scheme)
        return backend.file_facts(url, self.options(self.source_access)).adler32

    def transfer(self, target: FileTarget, destination: str) -> None:
        client, record = self.client, self.record
        stream = CopyStream()
        started = client.now()
        try:
            if self.http:
                sides = Sides(
                    self.pull, target.url, destination, self.source_access, self.destination_access
                )
                http_third_party_copy(sides, client.options, client.now, stream)
            else:
                xroot_third_party_copy(target.url, destination, client.options)
        finally:
            ended = client.now()
            client.result.add_phase("tpc", started, ended)
            record.markers += zip(stream.marker_s, stream.marker_bytes, strict=True)
            record.remote_connections = record.remote_connections or stream.remote_connections
        client.latencies("tpc").append(int((ended - started) * 1e9))
        # XRootD's TPC tells nothing until it ends: no time to start.
        start = stream.start_s if self.http else None
        if record.start_s is None and start is not None:
            record.start_s = start - started
            client.result.ttfb_s = start
        record.copy_s += ended - started
        record.bytes += target.size
        client.delivered += target.size
        client.progress[client.spec.client] = client.delivered

    def verify(self, destination: str, expected: str | None) -> None:
        """The destination's adler32 of the copy against the source's (class checksum)."""
        client = self.client
        started = client.now()
        backend = backend_for(client.params.destination_scheme or client.params.scheme)
        facts = backend.file_facts(destination, self.options(self.destination_access))
        client.result.add_phase("checksum", started, client.now())
        if facts.adler32 is None:
            return
        client.result.server_checksum = f"adler32:{facts.adler32}"
        if expected is None:
            return
        if facts.adler32 != expected.lower():
            client.result.checksum = "mismatch"
            raise ProbeError(
                ErrorClass.CHECKSUM,
                f"the copy at {destination} has adler32 {facts.adler32}, the source {expected}",
            )
        client.result.checksum = "ok"

    def delete(self, destination: str, *, quiet: bool) -> None:
        """Remove the copy; after a failed copy a refusal to delete is not the run's news
        (a destination that refused to write refuses to delete as well)."""
        client = self.client
        options = self.options(self.destination_access)
        started = client.now()
        try:
            if self.http:
                http_delete(destination, options)
            else:
                xroot_delete(destination, options)
        except ProbeError:
            if not quiet:
                raise
        finally:
            ended = client.now()
            client.result.add_phase("delete", started, ended)
            client.latencies("delete").append(int((ended - started) * 1e9))


def run_third_party_copies(client: Client) -> None:
    """The measurement of a tpc-pull or tpc-push client (Client.run)."""
    ThirdPartyCopies(client).run()
