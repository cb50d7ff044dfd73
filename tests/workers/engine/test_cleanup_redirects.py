"""A cleanup's listing and deletes go with the run's token only where the run's clients may:
the endpoint's own server and the hosts listed for it (issue 20; docs/engine.md, "Tokens and
redirections").

A write run's sweep and `cleanup_written` (the reaper's, a remote agent's) list the run's
directory and `rm` its files through XrdCl, which follows a redirection of either with the
token on its own. The set-up: a TLS token server at 127.0.0.1 whose namespace operations
(`xrootd.redirect HOST:PORT rm`, or `dirlist rm`) another server answers, the lab's own token
site under another name (localhost:PORT), which shares the scratch folder on disk. Without
the egress guard the token logs in there and the files are deleted; with it the connection
is refused before anything is sent, so that server's log shows no login and the files stay.
Listing the host lets the same cleanup through, and the login is logged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.redirecting_server import (
    LOOPBACK,
    LogWatch,
    RedirectingServer,
    port_of,
    redirecting_xrootd,
)
from tests.workers.engine.conftest import MiB, WritableDoor
from workers.engine.cleanup import cleanup_written
from workers.engine.credentials import Access, Credential, run_secrets
from workers.engine.driver import _new_result, _sweep_after_cut_copies, run_probe
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.params import Operation, RunParams, written_name
from workers.engine.results import RunResult
from workers.lab import Lab

pytestmark = pytest.mark.lab

# The local site's scratch folder, as the redirecting server exports it.
SCRATCH = "/scratch/local/"
SECOND = "local-roots"  # the lab's local token site: where the redirection sends the token

# Where namespace operations are redirected: the delete only (the listing is answered by the
# endpoint, so the refusal is the rm's), or the listing and the delete.
NAMESPACE_REDIRECTS = [("rm",), ("dirlist", "rm")]


@pytest.fixture
def left_files(writable_door: WritableDoor) -> Iterator[list[Path]]:
    """Two files of run `leftover` in the local scratch folder, as a worker killed mid-write
    leaves them; removed at the end whatever the cleanup did."""
    files = [writable_door.folder / written_name("leftover", client, 0) for client in (0, 1)]
    for path in files:
        path.write_bytes(b"written by a run whose worker died")
    yield files
    for path in files:
        path.unlink(missing_ok=True)


def redirecting(lab: Lab, redirected: tuple[str, ...]) -> AbstractContextManager[RedirectingServer]:
    """The token server at 127.0.0.1 whose `redirected` operations the second server answers."""
    second = f"localhost:{port_of(lab, SECOND)}"
    return redirecting_xrootd(lab, second, token=True, redirected=redirected)


def write_token(lab: Lab) -> Credential:
    return Credential.token(lab.token_file("write").read_text().strip())


def second_log(lab: Lab) -> LogWatch:
    return LogWatch(lab.paths.server_log("local-token", "xrootd"))


def cleanup(lab: Lab, first: RedirectingServer, hosts: tuple[str, ...] = ()) -> list[str]:
    return cleanup_written(
        run_tag="leftover",
        urls=[first.url("roots", SCRATCH)],
        credential=write_token(lab),
        ca_dir=str(lab.ca_dir()),
        egress=LOOPBACK,
        credential_hosts=hosts,
    )


def write_run(lab: Lab, directory: str, *, run_tag: str) -> RunResult:
    """Two clients writing 1 MiB each in `directory` with the lab's write token."""
    return run_probe(
        RunParams(
            urls=(directory,),
            operation=Operation.WRITE,
            clients=2,
            file_size=MiB,
            read_size=256 * 1024,
            run_tag=run_tag,
            timeout_s=30,
            credential=write_token(lab),
            ca_dir=str(lab.ca_dir()),
            egress=LOOPBACK,
        )
    )


def assert_refusal(message: str, port: int) -> None:
    assert f"refused: a connection to 127.0.0.1:{port} (localhost)" in message, message
    assert "carrying the run's credential" in message
    assert "nor a host listed in its credential_hosts (none)" in message


@pytest.mark.parametrize("redirected", NAMESPACE_REDIRECTS)
def test_a_cleanup_never_takes_the_token_where_its_namespace_operations_are_redirected(
    lab: Lab, left_files: list[Path], redirected: tuple[str, ...]
) -> None:
    second = port_of(lab, SECOND)
    watch = second_log(lab)
    with (
        redirecting(lab, redirected) as first,
        pytest.raises(ProbeError) as refused,
    ):
        cleanup(lab, first)
    assert refused.value.error_class == ErrorClass.EGRESS
    assert_refusal(refused.value.message, second)
    assert watch.logins() == []
    assert all(path.exists() for path in left_files)


def test_a_cleanup_through_a_listed_host_deletes_the_files_and_the_login_is_seen(
    lab: Lab, left_files: list[Path]
) -> None:
    watch = second_log(lab)
    with redirecting(lab, ("rm",)) as first:
        deleted = cleanup(lab, first, hosts=("localhost",))
    assert deleted == [first.url("roots", SCRATCH + path.name) for path in left_files]
    assert not any(path.exists() for path in left_files)
    assert any("login as" in line for line in watch.logins())


def test_a_write_runs_sweep_never_takes_the_token_where_its_deletes_are_redirected(
    lab: Lab, writable_door: WritableDoor
) -> None:
    """The clients' own deletes are refused as the sweep's: the files are left for the sweep,
    which would follow the redirection with the token if it were not held too."""
    second = port_of(lab, SECOND)
    watch = second_log(lab)
    try:
        with redirecting(lab, ("rm",)) as first:
            result = write_run(lab, first.url("roots", SCRATCH), run_tag="sweepheld")
        assert result.run_error is not None
        error_class, message = result.run_error
        assert error_class == ErrorClass.EGRESS
        assert message.startswith("cleanup of the written files: refused: "), message
        assert_refusal(message, second)
        for client in result.clients:
            assert client.error is not None and client.error.error_class == ErrorClass.EGRESS
        assert watch.logins() == []
        left = [name for name in writable_door.names() if name.startswith("fedprobe-sweepheld-")]
        assert left == [written_name("sweepheld", client, 0) for client in (0, 1)]
    finally:
        for client in (0, 1):
            (writable_door.folder / written_name("sweepheld", client, 0)).unlink(missing_ok=True)


def test_a_cut_copys_sweep_never_takes_the_destinations_token_where_its_deletes_are_redirected(
    lab: Lab, left_files: list[Path]
) -> None:
    """A native TPC cut mid-copy leaves its copies at the destination; the run sweeps them
    with the destination's token, held to the destination's own server (the hosts listed
    for the run are the source's: here the second server, which must not see it)."""
    second = port_of(lab, SECOND)
    watch = second_log(lab)
    with redirecting(lab, ("rm",)) as first:
        params = RunParams(
            urls=(lab.endpoint(SECOND).file_url("/fedprobe/file-1M"),),
            operation=Operation.TPC_PULL,
            destination=first.url("roots", SCRATCH),
            run_tag="leftover",
            ca_dir=str(lab.ca_dir()),
            egress=LOOPBACK,
            credential_hosts=("localhost",),  # the source's list: not the destination's
        )
        result = _new_result(params)
        with run_secrets(write_token(lab), scheme="roots", ca_dir=str(lab.ca_dir())) as token:
            access = Access(ca_dir=str(lab.ca_dir()), destination=token)
            _sweep_after_cut_copies(params, access, result, cut_at=time.monotonic())
    assert result.run_error is not None
    error_class, message = result.run_error
    assert error_class == ErrorClass.EGRESS, message
    assert message.startswith(f"cleanup of the copies at {params.destination}: refused: ")
    assert f"refused: a connection to 127.0.0.1:{second} (localhost)" in message
    assert watch.logins() == []
    assert all(path.exists() for path in left_files)
