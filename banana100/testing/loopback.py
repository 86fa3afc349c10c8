"""What the loopback stand-ins of the editors' services (gemini_standin, image_api_standin) share."""

from __future__ import annotations

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port), started by `_serve(handler class)` and stopped by `close()`
    or leaving a `with` block. Each request takes a fault spec (`_take_spec`): the next of those `script([...])`
    queued, else the first of `rules` ((predicate of the request's info, spec) pairs) whose predicate holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.faults: deque = deque()
        self.rules: list = []
        self.requests: list[dict] = []  # info of every request, in arrival order
        self.responses: list[str] = []  # what each request got ("ok", "http_429", ...)
        self.keys_seen: set[str] = set()

    def _take_spec(self, info: dict, key: str) -> dict:
        """The request's fault spec ({} for none), the request and its API key recorded."""
        with self.lock:
            self.keys_seen.add(key)
            spec = self.faults.popleft() if self.faults else None
            if spec is None:
                spec = next((rule for pred, rule in self.rules if pred(info)), None)
            self.requests.append(info)
        return dict(spec or {})

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> str:
        """Start answering with `handler` in a daemon thread; the server's base URL."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, specs) -> None:
        with self.lock:
            self.faults.extend(specs)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def request_body(handler: BaseHTTPRequestHandler) -> bytes | None:
    """The request's body, or None when the client went away mid-upload (a kill): fewer bytes came than it
    announced, and a real service never sees such a request. The connection is then closed unanswered."""
    length = int(handler.headers.get("content-length") or 0)
    body = handler.rfile.read(length)
    if len(body) < length:
        handler.close_connection = True
        return None
    return body
