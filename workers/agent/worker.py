"""The agent's Celery worker: it consumes its vantage point's queue on the broker with the
account enrolment gave it (which reaches that queue only), one run at a time, and measures
each run the server sends there (the message carries only the run's id: runner.measure
asks the server for the rest). Its health is reported to the server as a deployment's
workers report theirs (webapp/celery.py's Heartbeat), through the agent API. As often, it
asks the server for the cleanups of its lost runs and runs them: a deployment's worker is
sent those on its queue; the agent asks, and gets each with its credential sealed to it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown
from celery.worker import state as worker_state
from nacl.public import PrivateKey

from workers.agent.api import AgentApi, AgentApiError
from workers.agent.config import AgentConfig, HostSettings, amqp_tls_options
from workers.agent.runner import clean_up_due, measure
from workers.engine.credentials import remove_stale_run_dirs
from workers.engine.processes import allow_children_in_pool_process

log = logging.getLogger(__name__)

# The server's name for the task (webapp/campaigns/dispatch.py MEASURE_RUN).
MEASURE_RUN = "fedprobe.measure_run"
HEALTH_S = float(os.environ.get("FEDPROBE_WORKER_HEARTBEAT_S", "30"))


def make_app(folder: Path) -> tuple[Celery, AgentConfig]:
    """The agent's Celery app for the agent enrolled in `folder`."""
    config, key = AgentConfig.read(folder)
    host = HostSettings.from_environment()
    # No Django fix-up: it would set Django up wherever DJANGO_SETTINGS_MODULE is set (the
    # project's image sets it), and the agent has no Django settings to give it.
    app = Celery("fedprobe-agent", fixups=[])
    app.conf.update(
        broker_url=config.broker_url,
        broker_use_ssl=amqp_tls_options(config.broker_url, config.server_ca_file),
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # rides out a broker restart
        broker_heartbeat=30,
        task_default_queue=config.queue,
        task_create_missing_queues=True,
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        task_ignore_result=True,
        result_backend=None,
        worker_prefetch_multiplier=1,
        # The account may touch its own queue and nothing else: no remote control (its
        # pidbox exchange), no events, nothing to publish.
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
    )

    @app.task(name=MEASURE_RUN, acks_late=True, reject_on_worker_lost=False)
    def measure_run(run_id: int) -> None:
        api = AgentApi(config.server, token=config.agent_token, ca_file=config.server_ca_file)
        try:
            measure(int(run_id), api=api, config=config, key=key, host=host, worker=_worker_name())
        finally:
            api.close()

    _Health.configure(config)
    _Cleanups.configure(config, key, host)
    return app, config


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@worker_process_init.connect
def _let_pool_processes_start_clients(**kwargs: Any) -> None:
    allow_children_in_pool_process()


class _Health:
    """A thread of the worker's main process telling the server every HEALTH_S that this
    worker consumes its vantage point's queue (and which run it measures), and that it
    stopped, at a warm shutdown."""

    config: AgentConfig | None = None
    running: _Health | None = None

    @classmethod
    def configure(cls, config: AgentConfig) -> None:
        cls.config = config

    def __init__(self, hostname: str) -> None:
        assert self.config is not None
        self.api = AgentApi(
            self.config.server, token=self.config.agent_token, ca_file=self.config.server_ca_file
        )
        self.worker = {
            "hostname": hostname,
            "pid": os.getpid(),
            "version": _version(),
            "started_at": datetime.now(UTC).isoformat(),
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fedprobe-agent-health", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._report({"current_run_id": _current_run_id()})
            self._stop.wait(HEALTH_S)

    def _report(self, more: dict[str, Any]) -> None:
        try:
            self.api.heartbeat({**self.worker, **more})
        except AgentApiError as exc:  # a missed beat is logged; the next one tries again
            log.warning("worker health not reported: %s", exc)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._report({"stopped": True})
        self.api.close()


class _Cleanups:
    """A thread of the worker's main process asking the server every HEALTH_S for the
    cleanups of this vantage point's lost runs and running them (one at a time, beside the
    run its pool process may be measuring: a cleanup touches only a lost run's names)."""

    settings: tuple[AgentConfig, PrivateKey, HostSettings] | None = None
    running: _Cleanups | None = None

    @classmethod
    def configure(cls, config: AgentConfig, key: PrivateKey, host: HostSettings) -> None:
        cls.settings = (config, key, host)

    def __init__(self) -> None:
        assert self.settings is not None
        self.config, self.key, self.host = self.settings
        self.api = AgentApi(
            self.config.server, token=self.config.agent_token, ca_file=self.config.server_ca_file
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="fedprobe-agent-cleanups", daemon=True
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                clean_up_due(api=self.api, config=self.config, key=self.key, host=self.host)
            except AgentApiError as exc:  # logged; the next poll asks again
                log.warning("cleanups not asked for or not reported: %s", exc)
            except Exception:  # a bug of ours: said, and the thread goes on polling
                log.exception("cleanups failed")
            self._stop.wait(HEALTH_S)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.api.close()


@worker_ready.connect
def _start_health(sender: Any, **kwargs: Any) -> None:
    remove_stale_run_dirs()
    if _Health.config is not None:
        _Health.running = _Health(sender.hostname)
        _Health.running.start()
    if _Cleanups.settings is not None:
        _Cleanups.running = _Cleanups()
        _Cleanups.running.start()


@worker_shutdown.connect
def _stop_health(**kwargs: Any) -> None:
    if _Cleanups.running is not None:
        _Cleanups.running.stop()
        _Cleanups.running = None
    if _Health.running is not None:
        _Health.running.stop()
        _Health.running = None


def _current_run_id() -> int | None:
    for request in list(worker_state.active_requests):
        if request.name == MEASURE_RUN and request.args:
            return int(request.args[0])
    return None


def _version() -> str:
    try:
        return package_version("fedprobe")
    except PackageNotFoundError:
        return "unknown"
