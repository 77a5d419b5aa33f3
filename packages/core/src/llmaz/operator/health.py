"""``/healthz`` and ``/readyz`` on the health port (aiohttp, which kopf already needs)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["HealthServer"]


class HealthServer:
    """``/healthz``: the process answers. ``/readyz``: 200 once this replica is either a standby or
    a leader whose watches are listed (``state`` says which); 503 while starting."""

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        self.port = port
        self.host = host
        self.state = "starting"
        self.ready = False
        self._runner: web.AppRunner | None = None

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
