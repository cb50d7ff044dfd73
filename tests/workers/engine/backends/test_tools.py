"""Copy tools are run with argv lists, never through a shell: what each tool receives is
exactly the engine's arguments (issue 10, "assert the argv, not only the refusals"). The
tools are stand-ins on PATH that record their argv and write the file: what is under test
is the command line the engine builds, not xrdcp or globus-url-copy."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.gridftp import GridFtpBackend
from workers.engine.backends.xroot import XRootDBackend
from workers.engine.deadline import Deadline

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
dest = sys.argv[-1].removeprefix("file://")
with open(dest, "wb") as out:
    out.write(b"copied")
"""


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("xrdcp", "globus-url-copy"):
        tool = tools / name
        tool.write_text(RECORDER.format(python=sys.executable))
        tool.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ARGV_LOG", str(log))
    return log


def options(streams: int = 1) -> OpenOptions:
    return OpenOptions(user="fpc0", streams=streams, deadline=Deadline.after(30))


def test_xrdcp_gets_the_url_and_destination_as_arguments_of_their_own(
    recorded: Path, tmp_path: Path
) -> None:
    url = "root://127.0.0.1:1094//data/a;b$(touch x)&c"
    dest = tmp_path / "copy"
    copied = XRootDBackend().copy_to_local(url, dest, options(streams=2))
    assert copied.bytes_copied == len(b"copied")
    (argv,) = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert argv == [
        "--nopbar",
        "--force",
        "--streams",
        "2",
        "root://fpc0@127.0.0.1:1094//data/a;b$(touch x)&c",
        str(dest.resolve()),
    ]
    assert not (Path.cwd() / "x").exists()


def test_globus_url_copy_gets_options_then_double_dash_then_the_urls(
    recorded: Path, tmp_path: Path
) -> None:
    url = "gsiftp://127.0.0.1:2811/data/a;b"
    dest = tmp_path / "copy"
    GridFtpBackend().copy_to_local(url, dest, options(streams=4))
    (argv,) = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert argv == ["-p", "4", "--", url, f"file://{dest.absolute()}"]
