"""A real Nagios core (Debian's nagios4) runs both plugins with the command definitions of
docs/monitoring-probes.md: `probe --nagios` against a lab endpoint and `check_watch` against
this database; the states and performance data it records are what the plugins said."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.celery_worker import database_url
from tests.webapp.factories import RegressionFactory, SeriesNightFactory, TestFileFactory
from tests.workers.engine.conftest import FILE_4M, lab_file
from webapp.watch.models import Regression

ROOT = Path(__file__).resolve().parents[3]
NAGIOS = shutil.which("nagios4", path="/usr/sbin:/usr/bin")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(NAGIOS is None, reason="nagios4 is not installed (bin/setup --tests)"),
]

MAIN_CFG = """\
log_file={d}/nagios.log
cfg_file={d}/objects.cfg
status_file={d}/status.dat
status_update_interval=1
object_cache_file={d}/objects.cache
precached_object_file={d}/objects.precache
temp_file={d}/nagios.tmp
temp_path={d}
lock_file={d}/nagios.lock
check_result_path={d}/checkresults
command_file={d}/nagios.cmd
query_socket={d}/nagios.qh
illegal_macro_output_chars=`~$&|'"<>
check_external_commands=1
retain_state_information=0
use_retained_scheduling_info=0
nagios_user={user}
nagios_group={group}
enable_notifications=0
enable_event_handlers=0
enable_flap_detection=0
interval_length=1
service_check_timeout=60
check_result_reaper_frequency=1
"""

OBJECTS_CFG = """\
define timeperiod {{
  timeperiod_name  always
  alias            always
  sunday 00:00-24:00
  monday 00:00-24:00
  tuesday 00:00-24:00
  wednesday 00:00-24:00
  thursday 00:00-24:00
  friday 00:00-24:00
  saturday 00:00-24:00
}}
define command {{
  command_name  always_up
  command_line  /bin/true
}}
define contact {{
  contact_name                   nobody
  host_notifications_enabled     0
  service_notifications_enabled  0
  host_notification_period       always
  service_notification_period    always
  host_notification_options      n
  service_notification_options   n
  host_notification_commands     always_up
  service_notification_commands  always_up
}}
define host {{
  host_name              lab
  address                127.0.0.1
  check_command          always_up
  max_check_attempts     1
  check_period           always
  contacts               nobody
  notification_period    always
}}
define service {{
  host_name              lab
  service_description    read
  check_command          check_fedprobe_read!{url}!{warning}!availability=50:
  max_check_attempts     1
  check_interval         3600
  retry_interval         3600
  check_period           always
  contacts               nobody
  notification_interval  0
  notification_period    always
}}
define service {{
  host_name              lab
  service_description    watch
  check_command          check_fedprobe_watch!nagios-core-site!!90:
  max_check_attempts     1
  check_interval         3600
  retry_interval         3600
  check_period           always
  contacts               nobody
  notification_interval  0
  notification_period    always
}}
"""


@pytest.fixture
def nagios_dir(lab: Any, transactional_db: None) -> Iterator[Path]:
    """A Nagios configuration of the two services, checked by `nagios4 -v` (the core runs them
    with this process's environment: the test database, the lab's checkout). In a short
    folder of its own: the query handler's socket path must fit a sockaddr_un (108 bytes)."""
    tmp_path = Path(tempfile.mkdtemp(prefix="fedprobe-nagios-", dir="/tmp"))
    try:
        yield _configure(tmp_path, lab)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _configure(tmp_path: Path, lab: Any) -> Path:
    test_file = TestFileFactory(endpoint__site__name="nagios-core-site", path=FILE_4M)
    SeriesNightFactory(endpoint=test_file.endpoint)
    RegressionFactory(
        endpoint=test_file.endpoint,
        severity=Regression.Severity.CRITICAL,
        summary="every read fails: not-found",
    )
    url, _ = lab_file(lab, "local-root", FILE_4M)
    (tmp_path / "checkresults").mkdir()
    user, group = _user_group()
    (tmp_path / "nagios.cfg").write_text(MAIN_CFG.format(d=tmp_path, user=user, group=group))
    warning = "throughput=0.001:,open_time=~:30"
    objects = OBJECTS_CFG.format(url=url, warning=warning)
    (tmp_path / "objects.cfg").write_text(docs_nagios_commands() + objects)
    assert NAGIOS is not None
    verified = subprocess.run(
        [NAGIOS, "-v", str(tmp_path / "nagios.cfg")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout
    return tmp_path


def docs_nagios_commands() -> str:
    """The `define command` blocks of docs/monitoring-probes.md's Nagios section, pointed at
    this checkout: the test runs what operators are told to write."""
    text = (ROOT / "docs" / "monitoring-probes.md").read_text()
    block = text.split("## Nagios", 1)[1].split("```", 2)[1]
    commands = [part for part in block.split("define ") if part.startswith("command {")]
    assert len(commands) == 2
    found = "".join(f"define {part.rstrip()}\n" for part in commands)
    return found.replace("/opt/fedprobe/.venv/bin/python", sys.executable).replace(
        "/opt/fedprobe", str(ROOT)
    )


def _user_group() -> tuple[str, str]:
    import grp
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def services(status: Path) -> dict[str, dict[str, str]]:
    """The servicestatus blocks of Nagios's status.dat, by service description."""
    found: dict[str, dict[str, str]] = {}
    block: dict[str, str] | None = None
    for raw in status.read_text(errors="replace").splitlines():
        line = raw.strip()
        if line == "servicestatus {":
            block = {}
        elif line == "}" and block is not None:
            found[block["service_description"]] = block
            block = None
        elif block is not None and "=" in line:
            key, _, value = line.partition("=")
            block[key] = value
    return found


def test_nagios_records_the_plugins_states_and_perfdata(nagios_dir: Path) -> None:
    assert NAGIOS is not None
    env = {k: v for k, v in os.environ.items() if k != "FEDPROBE_CA_DIR"}
    env.update(PYTHONPATH=str(ROOT), DATABASE_URL=database_url(connection.settings_dict))
    core = subprocess.Popen(
        [NAGIOS, str(nagios_dir / "nagios.cfg")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        checked = _force_checks(nagios_dir, ["read", "watch"])
    finally:
        core.terminate()
        core.wait(timeout=10)
    read, watch = checked["read"], checked["watch"]
    assert read["current_state"] == "0", read["plugin_output"]
    assert read["plugin_output"].startswith("FEDPROBE OK: throughput ")
    perf = read["performance_data"]
    assert "'throughput_mbps'=" in perf and ";0.001:;;0 " in perf
    assert "'availability'=100%;;50:;0;100" in perf
    assert watch["current_state"] == "2", watch["plugin_output"]
    assert "every read fails: not-found (critical, open since" in watch["plugin_output"]
    assert "'critical'=1;;;0" in watch["performance_data"]


def _force_checks(directory: Path, names: list[str]) -> dict[str, dict[str, str]]:
    """Ask the core to check the services now (an external command), and wait until
    status.dat has a result of each."""
    pipe, status = directory / "nagios.cmd", directory / "status.dat"
    deadline = time.monotonic() + 45
    while not pipe.exists():
        assert time.monotonic() < deadline, (directory / "nagios.log").read_text()
        time.sleep(0.05)
    now = int(time.time())
    with pipe.open("w") as commands:
        for name in names:
            commands.write(f"[{now}] SCHEDULE_FORCED_SVC_CHECK;lab;{name};{now}\n")
    while True:
        found = services(status) if status.exists() else {}
        if all(found.get(n, {}).get("has_been_checked") == "1" for n in names):
            return found
        assert time.monotonic() < deadline, (directory / "nagios.log").read_text()
        time.sleep(0.2)
