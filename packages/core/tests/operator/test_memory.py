"""The operator hands the C heap's free pages back once a burst of reconciles is over (issue 15):
once at start, once after each burst, never while work is queued or children are being created,
and not again while nothing happens. The operator's real queue and worker, with the reconcile
replaced by a recorder and ``malloc_trim`` by a recorder (no API server is involved); the last test
calls the real ``malloc_trim`` of this machine's C library."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.operator import engine, memory
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import Runtime


@pytest.fixture
def rt(make_runtime: Callable[[Any], Runtime]) -> Runtime:
    runtime = make_runtime(None)
    runtime.queue.workers = runtime.config.workers  # no worker starts: what is queued stays queued
    return runtime


async def _ticks(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_the_heap_is_trimmed_at_start_and_once_after_each_burst(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciled: list[tuple[str, ...]] = []

    async def record(_rt: Runtime, *key: str) -> None:
        reconciled.append(key)

    monkeypatch.setattr(engine, "reconcile_named", record)
    trims: list[int] = []

    async def scenario() -> None:
        trimmer = asyncio.create_task(memory.trim_after_bursts(rt, trims.append, every=0))
        await _ticks()
        assert trims == [0], "start-up leaves memory free: one trim, and none while nothing happens"

        for name in ("a", "b", "c"):
            engine.enqueue(rt, "Playground", "ns", name)
        await _ticks()
        assert trims == [0], "no trim while reconciles are queued"

        rt.queue.workers = 1
        await engine._work(rt)  # the burst
        assert len(reconciled) == 3
        rt.creates[ObjectKey("v1", "Service", "ns", "a-lb")] = object()  # type: ignore[assignment]
        await _ticks()
        assert trims == [0], "no trim while a child is being created"

        rt.creates.clear()
        await _ticks()
        assert trims == [0, 0], "the burst is over: one trim"
        await _ticks()
        assert trims == [0, 0], "and not again until the next burst"

        trimmer.cancel()

    asyncio.run(scenario())


def test_the_c_library_here_has_malloc_trim() -> None:
    trim = memory.c_malloc_trim()
    assert trim is not None, "glibc's malloc_trim not found: the operator would never trim its heap"
    assert trim(0) in (0, 1)
