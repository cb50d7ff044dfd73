"""`python -m workers.agent enrol URL TOKEN | run | status`: a remote vantage point's agent
(docs/vantage-points.md).

  enrol URL TOKEN   make this host's key pair, enrol with the fedprobe server at URL using
                    the one-time TOKEN an admin got from `manage.py vantage enrol NAME`, and
                    keep what it answers in the agent's folder (0700, files 0600)
  run               consume the vantage point's queue and measure what arrives
  status            what this agent is enrolled as (no secret shown)

The folder is --dir, else FEDPROBE_AGENT_DIR, else ~/.config/fedprobe-agent. The token may
also come on stdin (TOKEN given as -), keeping it out of the process list.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from workers.agent.api import AgentApi, AgentApiError
from workers.agent.config import AgentConfig, AgentConfigError, agent_dir
from workers.agent.sealing import encode_key, fingerprint, new_private_key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.agent", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dir", default=None, help="the agent's folder")
    actions = parser.add_subparsers(dest="action", required=True)
    enrol = actions.add_parser("enrol", help="enrol this host with a fedprobe server")
    enrol.add_argument("url", help="the server's address, https://fedprobe.example.org")
    enrol.add_argument("token", help="the one-time enrolment token (- reads it from stdin)")
    enrol.add_argument(
        "--ca-file",
        default="",
        help="PEM bundle the server's and the broker's certificates are verified against "
        "(default: the system store)",
    )
    actions.add_parser("run", help="measure the runs sent to this vantage point")
    actions.add_parser("status", help="what this agent is enrolled as")
    options = parser.parse_args(argv)
    folder = agent_dir(options.dir)
    try:
        if options.action == "enrol":
            return _enrol(folder, options.url, options.token, options.ca_file)
        if options.action == "status":
            return _status(folder)
        return _run(folder)
    except (AgentApiError, AgentConfigError) as exc:
        print(f"fedprobe agent: {exc}", file=sys.stderr)
        return 1


def _enrol(folder: Path, url: str, token: str, ca_file: str) -> int:
    if token == "-":
        token = sys.stdin.readline().strip()
    key = new_private_key()
    api = AgentApi(url, ca_file=ca_file)
    try:
        answer = api.enrol(token, encode_key(key.public_key))
    finally:
        api.close()
    config = AgentConfig(
        server=api.server,
        vantage_point=str(answer["vantage_point"]),
        queue=str(answer["queue"]),
        agent_token=str(answer["agent_token"]),
        broker_url=str(answer["broker_url"]),
        server_ca_file=ca_file,
    )
    config.write(folder, key)
    print(
        f"enrolled as vantage point {config.vantage_point} at {config.server} "
        f"(key {answer['public_key']}); folder {folder}. Start it: python -m workers.agent run"
    )
    return 0


def _status(folder: Path) -> int:
    config, key = AgentConfig.read(folder)
    print(f"vantage point {config.vantage_point} at {config.server}")
    print(f"queue {config.queue}; key {fingerprint(encode_key(key.public_key))}; folder {folder}")
    return 0


def _run(folder: Path) -> int:
    from workers.agent.worker import make_app

    app, config = make_app(folder)
    app.worker_main(
        [
            "worker",
            "-Q",
            config.queue,
            "--concurrency",
            "1",
            "-P",
            "prefork",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"{config.vantage_point}@{socket.gethostname()}",
            "-l",
            "INFO",
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
