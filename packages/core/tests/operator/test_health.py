"""``/readyz`` over real HTTP: a replica is ready as soon as it serves, standby or leader, and a
leader still listing its watches stays ready. The chart's webhook Service routes admission requests
to ready pods only; a standby that took over and turned unready while it listed left the webhook
Service without an endpoint, so every llmaz create in the cluster was refused meanwhile
(``failurePolicy: Fail``)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp

from llmaz.operator.health import HealthServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readiness_through_a_takeover() -> None:
    async def scenario() -> list[tuple[int, str]]:
        health = HealthServer(_free_port(), host="127.0.0.1")
        await health.start()
        seen: list[tuple[int, str]] = []
        try:
            async with aiohttp.ClientSession() as session:

                async def readyz() -> None:
                    async with session.get(f"http://127.0.0.1:{health.port}/readyz") as answer:
                        seen.append((answer.status, await answer.text()))

                await readyz()
                health.standing_by()
                await readyz()
                health.leading()  # took the Lease; the watches are being listed
                await readyz()
                health.listed()
                await readyz()
                async with session.get(f"http://127.0.0.1:{health.port}/healthz") as answer:
                    seen.append((answer.status, await answer.text()))
        finally:
            await health.stop()
        return seen

    assert asyncio.run(scenario()) == [
        (503, "starting\n"),
        (200, "standby\n"),
        (200, "leader: listing\n"),
        (200, "leader\n"),
        (200, "ok\n"),
    ]
