"""A stopping operator lets the reconciles and child creates in flight finish, and starts nothing
new (:func:`llmaz.operator.engine.drain`, called by the kopf cleanup handler on SIGTERM).

Before, the cleanup cancelled every task at once: a reconcile cut between its child writes and its
status write left the next leader half-done work, although the docs promised a 20 s wait. The
operator's real queue, workers, create slots and cleanup handler; the reconcile and the create
themselves are replaced by recorders that wait for the test's signal (no API server involved)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import kopf
import pytest

from llmaz.operator import engine
from llmaz.operator.handlers import build_registry
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import CreateLine, QueuedCreate, Runtime

Key = tuple[str, str, str]


@pytest.fixture
def rt(make_runtime: Callable[[Any], Runtime]) -> Runtime:
    runtime = make_runtime(None)
    runtime.config = runtime.config.model_copy(update={"workers": 1})
    return runtime


def _blocking_reconcile(
    monkeypatch: pytest.MonkeyPatch, release: asyncio.Event
) -> tuple[list[Key], list[Key]]:
    """Reconciles that wait for ``release``: (started, finished)."""
    started: list[Key] = []
    finished: list[Key] = []

    async def reconcile(_rt: Runtime, kind: str, namespace: str, name: str) -> None:
        started.append((kind, namespace, name))
        await release.wait()
        finished.append((kind, namespace, name))

    monkeypatch.setattr(engine, "reconcile_named", reconcile)
    return started, finished


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0)


def test_the_running_reconcile_finishes_and_nothing_new_starts(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> tuple[list[Key], list[Key], int]:
        release = asyncio.Event()
        started, finished = _blocking_reconcile(monkeypatch, release)
        engine.enqueue(rt, "Playground", "ns", "a")
        engine.enqueue(rt, "Playground", "ns", "b")  # waiting behind a (one worker)
        await _until(lambda: bool(started))
        retry = asyncio.get_running_loop().call_later(3600, engine.enqueue, rt, "Playground", "ns", "c")
        rt.retries["uid-c"] = retry
        stopping = asyncio.ensure_future(engine.drain(rt, timeout=3600))
        await _until(lambda: rt.queue.closed)
        engine.enqueue(rt, "Playground", "ns", "d")  # an event while stopping
        assert not stopping.done()  # still waiting for a's reconcile
        assert retry.cancelled()
        release.set()
        still_running = await stopping
        return started, finished, still_running

    started, finished, still_running = asyncio.run(scenario())
    assert finished == [("Playground", "ns", "a")]  # not cancelled half-way
    assert started == [("Playground", "ns", "a")]  # b waited, d came too late: the next leader's
    assert still_running == 0
    assert not rt.work


def test_a_reconcile_past_the_timeout_is_reported_for_cancelling(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> int:
        started, _ = _blocking_reconcile(monkeypatch, asyncio.Event())  # never released
        engine.enqueue(rt, "Playground", "ns", "stuck")
        await _until(lambda: bool(started))
        still_running = await engine.drain(rt, timeout=0.01)
        for task in list(rt.work):
            task.cancel()
        return still_running

    assert asyncio.run(scenario()) == 1


def test_the_create_in_flight_finishes_and_the_queued_ones_are_left(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[str] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def create(_rt: Runtime, _owner: Any, key: ObjectKey, *_: Any) -> None:
            await release.wait()
            created.append(key.name)

        monkeypatch.setattr(engine, "_create", create)
        line = CreateLine()
        for name in ("first", "second"):
            key = ObjectKey("v1", "Service", "ns", name)
            line.waiting.append(QueuedCreate({}, key, "digest", b"{}"))
        line.running = 1
        rt.spawn(engine._run_creates(rt, line), work=True)
        await _until(lambda: len(line.waiting) == 1)  # "first" is being created
        stopping = asyncio.ensure_future(engine.drain(rt, timeout=3600))
        await _until(lambda: rt.queue.closed)
        release.set()
        assert await stopping == 0

    asyncio.run(scenario())
    assert created == ["first"]


def test_the_cleanup_handler_drains_before_it_cancels(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = build_registry()
    [cleanup] = [h for h in registry._activities.get_all_handlers() if h.activity.value == "cleanup"]

    async def scenario() -> list[Key]:
        release = asyncio.Event()
        started, finished = _blocking_reconcile(monkeypatch, release)
        engine.enqueue(rt, "Playground", "ns", "a")
        await _until(lambda: bool(started))
        stopping = asyncio.ensure_future(cleanup.fn(memo=kopf.Memo(**{MEMO_KEY: rt})))
        await _until(lambda: rt.queue.closed)
        release.set()
        await stopping
        return finished

    assert asyncio.run(scenario()) == [("Playground", "ns", "a")]
