"""An OAuth issuer that accepts and never answers holds a run no longer than the run's own
deadline (it held one with a 10 s deadline for 32 s, the token request's fixed timeout), and
is not asked again by the campaign's next runs nor by Test connection: they fail at once with
its first answer, as tester faults (issue 17, item 3)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.webapp.factories import CampaignFactory, EndpointFactory, TestFileFactory
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.sites.services import endpoint_test_connection
from workers.engine.oauth import OAuthClient

pytestmark = pytest.mark.django_db


class SilentIssuer:
    """A TCP server on loopback that accepts every connection and never answers (a token
    endpoint whose service hangs behind its listening socket)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)  # kept open, never read or written

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def silent_issuer() -> Iterator[SilentIssuer]:
    issuer = SilentIssuer()
    yield issuer
    issuer.close()


def test_a_silent_issuer_holds_a_run_no_longer_than_its_deadline_and_is_not_asked_again(
    silent_issuer: SilentIssuer,
) -> None:
    client = OAuthClient(
        token_url=f"https://127.0.0.1:{silent_issuer.port}/token",
        client_id="probe",
        client_secret="cl1ent-s3cret",
    )
    endpoint = EndpointFactory(
        protocol="roots",
        base_url="roots://127.0.0.1:1/",
        credential_kind="oauth-client",
        credential=client.to_json(),
    )
    TestFileFactory(endpoint=endpoint)
    campaign = CampaignFactory(
        endpoints=[endpoint], read_sizes=[4096, 8192], clients=[1], deadline_s=3
    )
    first, second = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)

    began = time.monotonic()
    run_execute(run_id=first.pk, worker="test@host")
    took = time.monotonic() - began
    first.refresh_from_db()
    (error,) = first.errors
    assert first.status == Run.Status.FAILED
    assert (error["class"], error["phase"]) == ("timeout", "credential"), error
    assert first.is_tester_fault
    # Its deadline is 3 s; the issuer's fixed timeout was 30 s (generous: a loaded machine).
    assert took < 12, took
    assert len(silent_issuer.accepted) == 1

    began = time.monotonic()
    run_execute(run_id=second.pk, worker="test@host")
    second.refresh_from_db()
    (again,) = second.errors
    assert time.monotonic() - began < 3
    assert (again["class"], again["phase"]) == ("timeout", "credential")
    assert "not asked again" in again["message"]
    checked = endpoint_test_connection(endpoint=endpoint)
    assert not checked.ok and "not asked again" in checked.message
    assert len(silent_issuer.accepted) == 1  # one token request in all
    assert "cl1ent-s3cret" not in again["message"] + checked.message
