"""webhook_post (webhooks and HTTP archivers) against a real receiver on loopback that
answers at once but drips its body: only the status is read."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from webapp.notifications.channels import webhook_post


def test_an_answer_whose_body_drips_is_judged_by_its_status_alone() -> None:
    """Each piece of the body comes within the timeout, so a sender reading the body would
    wait as long as the receiver likes (and here fail on the body cut short)."""

    class Dripping(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(8):
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.25)
            self.close_connection = True  # 8 of 1000 bytes: the body is cut short

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Dripping)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        webhook_post(url=url, headers={}, body={"kind": "test"}, key="k-1", timeout_s=1.0)
    finally:
        server.shutdown()
        server.server_close()
