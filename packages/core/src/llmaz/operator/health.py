"""``/healthz`` and ``/readyz`` on the health port (aiohttp, which kopf already needs)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["HealthServer"]


class HealthServer:
    """``/healthz``: the process answers. ``/readyz``: 200 once this replica serves, as a standby or
    as the leader (``state`` says which, and whether the leader has listed its watches yet); 503
    only while the process starts.

    A leader that is still listing is ready too: the chart's webhook Service sends admission
    requests to ready pods only, and every replica answers them from the start. When a standby
    took over and turned unready while it listed, the webhook Service lost its only endpoint, and
    with ``failurePolicy: Fail`` every create of a llmaz object in the cluster was refused until
    the listing ended (a minute and more on a large cluster)."""

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        self.port = port
        self.host = host
        self.state = "starting"
        self.ready = False
        self._runner: web.AppRunner | None = None

    def standing_by(self) -> None:
        self.state, self.ready = "standby", True

    def leading(self) -> None:
        """Leader, listing its watches: reconciles wait for the listing, admission does not."""
        self.state, self.ready = "leader: listing", True

    def listed(self) -> None:
        self.state, self.ready = "leader", True

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        return web.Response(text=f"{self.state}\n", status=200 if self.ready else 503)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
