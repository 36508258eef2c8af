"""An HTTP reverse proxy that answers some requests with S3's own error answers (issue 52: throttling).

Toxiproxy breaks TCP; it cannot answer a request. `S3FaultProxy` sits in front of S3Proxy on a free
127.0.0.1 port, forwards each request unchanged (its Host header too, so the client's SigV4 signature
still holds) and passes the answer back, except while a `Throttle` is set: then the requests it picks get
S3's XML error answer instead (`503 SlowDown`, `500 InternalError`) and never reach the server. The
proxy counts what it forwarded and what it answered itself.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.servers import free_port

# S3's error answers: (status, reason, code, message), as AWS documents them
SLOW_DOWN = (503, "Slow Down", "SlowDown", "Please reduce your request rate.")
INTERNAL_ERROR = (
    500,
    "Internal Server Error",
    "InternalError",
    "We encountered an internal error. Please try again.",
)
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass(frozen=True)
class Throttle:
    """Which requests get `answer` instead of the server's: each with probability `share`, and only
    between `after` and `after + lasting` seconds from when the throttle is set (None: for good)."""

    answer: tuple[int, str, str, str] = SLOW_DOWN
    share: float = 1.0
    after: float = 0.0
    lasting: float | None = None
    seed: int = 52

    def picks(self, since: float, rng: random.Random) -> bool:
        in_window = since >= self.after and (self.lasting is None or since < self.after + self.lasting)
        return in_window and rng.random() < self.share


@dataclass
class S3FaultProxy:
    """The proxy; `port` is what a client's endpoint names instead of the server's `upstream_port`."""

    upstream_port: int
    port: int = field(default_factory=free_port)
    forwarded: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)  # "<code> <method>" of the errors it answered
    _throttle: Throttle | None = None
    _since: float = 0.0
    _rng: random.Random = field(default_factory=random.Random)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> S3FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered as S3 does

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                error = proxy._pick(self.command)
                if error is not None:
                    self._answer_error(error)
                else:
                    self._forward(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

            def _answer_error(self, error: tuple[int, str, str, str]) -> None:
                status, reason, code, message = error
                xml = (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                    f"</Message><RequestId>FAULTPROXY</RequestId><HostId>faultproxy</HostId></Error>"
                ).encode()
                self.send_response(status, reason)
                self.send_header("Content-Type", "application/xml")
                self.send_header("x-amz-request-id", "FAULTPROXY")
                self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(xml)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(xml)

            def _forward(self, body: bytes) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    headers.pop("Expect", None)
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream.getresponse()
                    payload = answer.read()
                finally:
                    upstream.close()
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                length = answer.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def throttle(self, throttle: Throttle | None) -> None:
        """From now on answer the requests `throttle` picks with its error (None: forward every one)."""
        with self._lock:
            self._throttle, self._since = throttle, time.monotonic()
            self._rng = random.Random(throttle.seed if throttle else 0)

    def _pick(self, method: str) -> tuple[int, str, str, str] | None:
        with self._lock:
            throttle = self._throttle
            if throttle is not None and throttle.picks(time.monotonic() - self._since, self._rng):
                self.answered[f"{throttle.answer[0]} {method}"] += 1
                return throttle.answer
            self.forwarded[method] += 1
            return None
