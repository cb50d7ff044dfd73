"""A real Icinga 2 (Debian's icinga2-bin) runs `probe --nagios` through the CheckCommand and
apply rule that docs/monitoring-probes.md tells operators to use, against a lab endpoint."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, lab_file
from tests.workers.engine.test_plugin import check_plugin_line

ROOT = Path(__file__).resolve().parents[3]
ICINGA = shutil.which("icinga2", path="/usr/sbin:/usr/bin")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(ICINGA is None, reason="icinga2 is not installed (bin/setup --tests)"),
]

# Around the docs' objects: a checker, a perfdata writer whose lines the test reads, the
# external command pipe that forces the check now (the docs' interval is 30 minutes), a host.
HARNESS = """\
include "fedprobe.conf"
object CheckerComponent "checker" {{ }}
object ExternalCommandListener "command" {{ command_path = "{d}/icinga2.cmd" }}
object PerfdataWriter "perf" {{
  service_perfdata_path = "{d}/service-perfdata"
  service_temp_path = "{d}/service-perfdata.tmp"
  host_perfdata_path = "{d}/host-perfdata"
  host_temp_path = "{d}/host-perfdata.tmp"
  service_format_template = "STATE::$service.state_id$\\tOUTPUT::$service.output$\\t{perf}"
  rotation_interval = 1s
}}
object CheckCommand "up" {{ command = [ "/bin/true" ] }}
object Host "se.example.org" {{
  check_command = "up"
  vars.fedprobe_url = "{url}"
}}
"""


def docs_icinga_objects() -> str:
    """The Icinga 2 block of docs/monitoring-probes.md, pointed at this checkout."""
    text = (ROOT / "docs" / "monitoring-probes.md").read_text()
    block = text.split("## Icinga 2", 1)[1].split("```", 2)[1]
    return block.replace("/opt/fedprobe/.venv/bin/python", sys.executable).replace(
        "/opt/fedprobe", str(ROOT)
    )


def test_icinga_runs_the_documented_check_command(lab: Any, tmp_path: Path) -> None:
    assert ICINGA is not None
    url, _ = lab_file(lab, "local-root", FILE_4M)
    (tmp_path / "fedprobe.conf").write_text(docs_icinga_objects())
    harness = HARNESS.format(d=tmp_path, url=url, perf="PERF::$service.perfdata$")
    (tmp_path / "icinga2.conf").write_text(harness)
    (tmp_path / "icinga2").mkdir()
    places = ("CacheDir", "StateDir", "DataDir", "LogDir", "InitRunDir", "SpoolDir")
    user, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    defines = [f"--define={name}={tmp_path}" for name in places]
    defines += [f"--define=RunAsUser={user}", f"--define=RunAsGroup={group}"]
    env = {k: v for k, v in os.environ.items() if k != "FEDPROBE_CA_DIR"}
    core = subprocess.Popen(
        [ICINGA, "daemon", "-c", str(tmp_path / "icinga2.conf"), *defines],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        fields = _forced_check(tmp_path, "se.example.org", "fedprobe-read")
    finally:
        core.terminate()
        core.wait(timeout=20)
    state, perf = check_plugin_line(fields["OUTPUT"] + " | " + fields["PERF"])
    assert int(fields["STATE"]) == ["OK", "WARNING", "CRITICAL", "UNKNOWN"].index(state)
    assert state != "UNKNOWN", fields["OUTPUT"]  # the arguments the docs build are good
    found = {item.split("=")[0].strip("'"): item.split("=", 1)[1] for item in perf}
    # The documented thresholds reached the plugin and came back in its perfdata.
    assert found["throughput_mbps"].split(";")[1:3] == ["50:", "10:"]
    assert found["availability"].split(";")[2] == "100:"


def _forced_check(directory: Path, host: str, service: str) -> dict[str, str]:
    """Force the service's check through the command pipe; its fields from the perfdata
    writer's files once there."""
    pipe = directory / "icinga2.cmd"
    deadline = time.monotonic() + 45
    while not pipe.exists():
        assert time.monotonic() < deadline, "icinga2 made no command pipe"
        time.sleep(0.05)
    now = int(time.time())
    pipe.write_text(f"[{now}] SCHEDULE_FORCED_SVC_CHECK;{host};{service};{now}\n")
    while True:
        for written in directory.glob("service-perfdata.*"):
            line = written.read_text().strip()
            if line and not written.name.endswith(".tmp"):
                return dict(field.split("::", 1) for field in line.split("\t"))
        assert time.monotonic() < deadline, "icinga2 wrote no check result"
        time.sleep(0.2)
