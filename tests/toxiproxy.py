"""Toxiproxy, a real TCP fault proxy, between tidelake and the test servers (issue 52: network faults).

`dev/setup.sh --test` builds the server once into `.cache/toxiproxy/`; `ToxiproxyServer` starts it on a
free 127.0.0.1 port and drives it through its HTTP API with urllib. A `Proxy` listens on its own free
port and forwards to one server; toxics added to it (latency, reset_peer, limit_data, timeout, ...) act on
every connection through it, open or new, until removed; `disable()` closes them all and refuses new ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import CHECKOUT
from tests.servers import free_port, stop, wait_for_port


def toxiproxy_server() -> Path:
    """The `server` binary `dev/setup.sh --test` builds (override with TIDELAKE_TOXIPROXY)."""
    return Path(os.environ.get("TIDELAKE_TOXIPROXY", CHECKOUT / ".cache" / "toxiproxy" / "server"))


@dataclass
class ToxiproxyServer:
    """One Toxiproxy server; its API on a free 127.0.0.1 port."""

    base: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> ToxiproxyServer:
        binary = toxiproxy_server()
        if not binary.exists():
            raise RuntimeError(f"no Toxiproxy at {binary}: run `dev/setup.sh --test` (it builds one)")
        log = self.base / "toxiproxy.log"
        self.process = subprocess.Popen(
            [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, 30, self.process, log)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API request; its JSON answer (None when empty)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"toxiproxy {method} {path}: {exc.code} {exc.read().decode()}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream_port: int, listen_port: int | None = None) -> Proxy:
        """A new proxy `name` on a free (or the given) port, forwarding to 127.0.0.1:`upstream_port`."""
        port = listen_port or free_port()
        self.call(
            "POST", "/proxies",
            {"name": name, "listen": f"127.0.0.1:{port}", "upstream": f"127.0.0.1:{upstream_port}", "enabled": True},
        )  # fmt: skip
        return Proxy(self, name, port)

    def reset(self) -> None:
        """Every proxy enabled again, every toxic removed."""
        self.call("POST", "/reset")


@dataclass
class Proxy:
    """One proxy of a `ToxiproxyServer`: connect to `port` instead of the server's own."""

    server: ToxiproxyServer
    name: str
    port: int

    def add(self, toxic: str, kind: str, stream: str = "downstream", **attributes: int) -> None:
        """Add toxic `toxic` of type `kind` (Toxiproxy's names) to `stream` (downstream: server to us)."""
        self.server.call(
            "POST", f"/proxies/{self.name}/toxics",
            {"name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes},
        )  # fmt: skip

    def remove(self, toxic: str) -> None:
        self.server.call("DELETE", f"/proxies/{self.name}/toxics/{toxic}")

    def toxics(self) -> list[str]:
        return [t["name"] for t in self.server.call("GET", f"/proxies/{self.name}/toxics")]

    def clear(self) -> None:
        """Remove every toxic and enable the proxy (a test leaves it clean for the next)."""
        for toxic in self.toxics():
            self.remove(toxic)
        self.enable()

    def disable(self) -> None:
        """Close every connection through the proxy and refuse new ones (a server gone away)."""
        self.server.call("POST", f"/proxies/{self.name}", {"enabled": False})

    def enable(self) -> None:
        self.server.call("POST", f"/proxies/{self.name}", {"enabled": True})

    @contextmanager
    def toxic(self, kind: str, stream: str = "downstream", **attributes: int) -> Iterator[None]:
        """`kind` in effect for the `with` block."""
        name = f"{kind}-{stream}"
        self.add(name, kind, stream, **attributes)
        try:
            yield
        finally:
            self.remove(name)
