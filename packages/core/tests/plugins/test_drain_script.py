"""The generated preStop script really waits for in-flight requests on the port it is given."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from llmaz.api import RecommendedConfig
from llmaz.plugins import Backend


class Metrics:
    running = 0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = (
            "# HELP engine:requests_running in flight\n"
            f'engine:requests_running{{model_name="m"}} {Metrics.running}.0\n'
            "engine:requests_waiting 0.0\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()


def backend_on(port: int) -> Backend:
    class Engine(Backend):
        name: ClassVar[str] = "engine"
        image: ClassVar[str] = "example/engine"
        version: ClassVar[str] = "1"
        drain_metrics: ClassVar[tuple[str, ...]] = ("engine:requests_running", "engine:requests_waiting")
        drain_timeout_seconds: ClassVar[int] = 20

        def recommended_configs(self) -> list[RecommendedConfig]:
            return [RecommendedConfig(name="default")]

    Engine.port = port
    return Engine()


def run_prestop(backend: Backend) -> subprocess.CompletedProcess[str]:
    lifecycle = backend.lifecycle()
    assert lifecycle is not None
    command = lifecycle["preStop"]["exec"]["command"]
    command[-1] = command[-1].replace("/proc/1/fd/1", "/dev/stderr")
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_returns_at_once_when_idle(server: int) -> None:
    Metrics.running = 0
    started = time.monotonic()
    res = run_prestop(backend_on(server))
    assert res.returncode == 0
    assert "drained" in res.stderr
    assert time.monotonic() - started < 5


def test_waits_for_in_flight_requests(server: int) -> None:
    Metrics.running = 2
    threading.Timer(3, lambda: setattr(Metrics, "running", 0)).start()
    started = time.monotonic()
    res = run_prestop(backend_on(server))
    assert "drained" in res.stderr
    assert time.monotonic() - started >= 3


def test_gives_up_when_nothing_listens() -> None:
    res = run_prestop(backend_on(1))  # nothing on port 1
    assert res.returncode == 0
    assert "metrics endpoint gone" in res.stderr
