"""A loopback TCP fault proxy in front of the API server: the stand-in for a flaky network path or
a load balancer between the operator and the control plane.

The operator's kubeconfig points at the proxy; TLS passes through untouched (the API server's
certificate names 127.0.0.1, so the operator verifies it as usual). Faults, switchable while
connections are open:

* ``latency``: seconds added before each chunk is forwarded, in both directions;
* :meth:`FaultProxy.reset_all`: abort every open connection (what a restarting load balancer does);
* ``refuse``: new connections are closed at once (the API server looks down);
* :meth:`FaultProxy.stall_existing`: every open connection silently stops delivering bytes, for good,
  while new connections pass (a load balancer that lost its connection state: a watch on such a
  connection never ends and never delivers, and only an inactivity timeout notices).

The proxy runs its own asyncio loop in a daemon thread of the test process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml

CHUNK = 65536


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream connection."""

    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    stalled: bool = False

    def abort(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.transport.abort()


class FaultProxy:
    """``with FaultProxy(upstream_port) as proxy:`` then point a kubeconfig at ``proxy.port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.latency = 0.0
        self.refuse = False
        self.accepted = 0
        self.resets = 0
        self.port = 0
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for link in list(self._links):
                link.abort()

        self._run(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ faults

    def reset_all(self) -> int:
        """Abort every open connection; returns how many there were."""

        async def reset() -> int:
            links = list(self._links)
            for link in links:
                link.abort()
            return len(links)

        count = int(self._run(reset()))  # type: ignore[call-overload]
        self.resets += count
        return count

    def stall_existing(self) -> int:
        """Stall every open connection for good (new ones pass); returns how many were stalled."""

        async def stall() -> int:
            for link in self._links:
                link.stalled = True
            return len(self._links)

        return int(self._run(stall()))  # type: ignore[call-overload]

    def open_links(self) -> int:
        return len(self._links)

    # ------------------------------------------------------------------ plumbing

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.refuse:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        link = _Link([writer, up_writer])
        self._links.add(link)
        try:
            pipes = (self._pipe(reader, up_writer, link), self._pipe(up_reader, writer, link))
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._links.discard(link)
            link.abort()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link) -> None:
        while True:
            data = await src.read(CHUNK)
            if not data:
                break
            if self.latency:
                await asyncio.sleep(self.latency)
            while link.stalled:  # bytes are held, never delivered: the peer sees silence
                await asyncio.sleep(3600)
            dst.write(data)
            await dst.drain()
        link.abort()  # one side closed: close both (no half-open connections to reason about)


def proxied_kubeconfig(source: Path, port: int, target: Path) -> Path:
    """A copy of ``source`` whose cluster server is the proxy on ``127.0.0.1:port``."""
    config = yaml.safe_load(source.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return target
