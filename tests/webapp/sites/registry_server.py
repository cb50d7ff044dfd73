"""A registry on loopback for the import tests: a real HTTP server (threads) answering each
path with the bytes a test put there, recording the paths asked for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Registry:
    """What the server answers (path with its query, else without -> body) and the paths it
    was asked."""

    url: str
    documents: dict[str, bytes] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    served = Registry(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.asked.append(self.path)
            body = served.documents.get(self.path, served.documents.get(self.path.split("?")[0]))
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
