"""The agent's side of the server's agent API (webapp/api/agents.py): HTTPS, the server
verified against the agent's CA file, `Authorization: Agent TOKEN` on every call but
enrolment. Plain http:// only to a server on this host's loopback (a test, or a tunnel)."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

# Each call is small; a server that does not answer in this long is treated as down.
CALL_TIMEOUT_S = 30.0
# A result is handed in again after these pauses (the server restarting): storing it twice
# stores it once.
RESULT_RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
TRACE_SHA256 = re.compile(r"[0-9a-f]{64}")


class AgentApiError(Exception):
    """The server refused or did not answer; the message says which (never a secret)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def check_server_url(url: str) -> str:
    """The server's base URL, without a trailing slash: https, or http to loopback only."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise AgentApiError(f"{url!r} is not the https:// address of a fedprobe server")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise AgentApiError(
            f"{url!r} is plain http: the agent's token would cross the network readable; "
            "use the server's https:// address"
        )
    return url.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Claim:
    run_id: int
    params: dict[str, Any]
    credential: str | None
    # A replay's trace, by the sha256 of its text (AgentApi.trace fetches it).
    trace_sha256: str | None = None
    # A copy's destination credential, sealed like `credential`.
    destination_credential: str | None = None


@dataclass(frozen=True)
class Cleanup:
    """A lost run's cleanup: delete fedprobe-<run_tag>-* in `urls` with `credential` (sealed
    like a claim's, for run `run_id`)."""

    run_id: int
    run_tag: str
    urls: tuple[str, ...]
    credential: str | None
    # Hosts besides the endpoint's the credential may be presented to (its redirections).
    credential_hosts: tuple[str, ...] = ()


class AgentApi:
    def __init__(self, server: str, *, token: str = "", ca_file: str = "") -> None:
        self.server = check_server_url(server)
        headers = {"User-Agent": "fedprobe-agent"}
        if token:
            headers["Authorization"] = f"Agent {token}"
        self._client = httpx.Client(
            base_url=f"{self.server}/api/v1/agent/",
            headers=headers,
            verify=ca_file or True,
            timeout=CALL_TIMEOUT_S,
            trust_env=False,
        )

    def close(self) -> None:
        self._client.close()

    def enrol(self, token: str, public_key: str) -> dict[str, Any]:
        return self._post("enrol/", {"token": token, "public_key": public_key}, expect=(201,))

    def claim(self, run_id: int, worker: str) -> Claim | None:
        """The run to measure, or None: nothing to do (204), or it must wait (409: the server
        sends it again)."""
        response = self._send(f"runs/{run_id}/claim/", {"worker": worker})
        if response.status_code in (204, 409):
            return None
        answer = self._json(response, (200,))
        return Claim(
            int(answer["run"]),
            dict(answer["params"]),
            answer.get("credential"),
            answer.get("trace_sha256"),
            answer.get("destination_credential"),
        )

    def trace(self, sha256: str) -> str:
        """The recorder CSV whose UTF-8 text has this sha256 (a replay this agent measures);
        AgentApiError if the server does not give it, or gives other bytes than the hash
        names (so the claim's hash, not the transfer, decides what is replayed)."""
        if not TRACE_SHA256.fullmatch(sha256):
            raise AgentApiError(f"{sha256!r} is not a sha256 (64 hex digits)")
        path = f"traces/{sha256}/"
        try:
            response = self._client.get(path)
        except httpx.HTTPError as exc:
            raise AgentApiError(
                f"{self.server} did not answer {path}: {type(exc).__name__}: {exc}"
            ) from None
        if response.status_code != 200:
            raise AgentApiError(
                f"{self.server} answered {response.status_code} to {path}", response.status_code
            )
        body = response.content
        if hashlib.sha256(body).hexdigest() != sha256:
            raise AgentApiError(f"{self.server} sent a trace whose sha256 is not {sha256}")
        return body.decode("utf-8")

    def progress(
        self, run_id: int, client_bytes: Sequence[int], finished: Sequence[dict[str, Any]]
    ) -> bool:
        """Report progress; True when the run is to be cancelled."""
        body = {"client_bytes": list(client_bytes), "finished": list(finished)}
        return bool(self._post(f"runs/{run_id}/progress/", body).get("cancel"))

    def failure(self, run_id: int, message: str, error_class: str, phase: str = "") -> None:
        body = {"message": message, "error_class": error_class, "phase": phase}
        self._post(f"runs/{run_id}/failure/", body)

    def result(self, run_id: int, run_json: dict[str, Any]) -> bool:
        """Hand in a run's JSON, again after a pause while the server does not answer (or
        answers 5xx); True when it was stored, False when the run had ended already."""
        for pause_s in (*RESULT_RETRY_S, None):
            try:
                return bool(self._post(f"runs/{run_id}/result/", run_json).get("stored"))
            except AgentApiError as exc:
                if pause_s is None or (exc.status is not None and exc.status < 500):
                    raise
            time.sleep(pause_s)
        raise AssertionError("unreachable")

    def cleanups(self) -> list[Cleanup]:
        """The due cleanups of this vantage point's lost runs (each an attempt to report)."""
        answer = self._post("cleanups/", {})
        try:
            return [
                Cleanup(
                    int(item["run"]),
                    str(item["run_tag"]),
                    tuple(str(url) for url in item["urls"]),
                    None if item.get("credential") is None else str(item["credential"]),
                    tuple(str(host) for host in item.get("credential_hosts", ())),
                )
                for item in answer["cleanups"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise AgentApiError(f"{self.server} answered cleanups/ with no list: {exc}") from None

    def cleanup_done(self, run_id: int, deleted: int) -> None:
        self._post(f"runs/{run_id}/cleanup/", {"deleted": deleted})

    def cleanup_failed(self, run_id: int, error: str) -> None:
        self._post(f"runs/{run_id}/cleanup/", {"error": error})

    def heartbeat(self, worker: dict[str, Any]) -> None:
        self._post("heartbeat/", worker, expect=(204,))

    def _post(self, path: str, body: object, expect: tuple[int, ...] = (200,)) -> dict[str, Any]:
        return self._json(self._send(path, body), expect)

    def _send(self, path: str, body: object) -> httpx.Response:
        try:
            return self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise AgentApiError(
                f"{self.server} did not answer {path}: {type(exc).__name__}: {exc}"
            ) from None

    def _json(self, response: httpx.Response, expect: tuple[int, ...]) -> dict[str, Any]:
        if response.status_code not in expect:
            detail = response.text[:300]
            raise AgentApiError(
                f"{self.server} answered {response.status_code} to {response.request.url.path}: "
                f"{detail}",
                response.status_code,
            )
        if response.status_code == 204:
            return {}
        answer = response.json()
        if not isinstance(answer, dict):
            raise AgentApiError(
                f"{self.server} answered {response.request.url.path} with no object"
            )
        return answer
