"""The order of the work queue (issue 15): reconciles that only bring a status up to date with its
pods wait behind Playgrounds and inference Services that still need their children, without being
held back for long, and a burst of them while they wait costs one reconcile. The operator's real
queue and worker, with the reconcile itself replaced by a recorder (no API server is involved)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.operator import engine
from llmaz.operator.runtime import LATER_MAX_WAIT, Runtime

Key = tuple[str, str, str]


@pytest.fixture
def rt(make_runtime: Callable[[Any], Runtime]) -> Runtime:
    runtime = make_runtime(None)
    runtime.queue.workers = runtime.config.workers  # no worker starts: what is queued stays queued
    return runtime


def _drain(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, during: Callable[[Key], None] | None = None
) -> list[Key]:
    """Run one worker over the queue; the keys in the order it reconciled them."""
    done: list[Key] = []

    async def record(_rt: Runtime, *key: str) -> None:
        done.append((key[0], key[1], key[2]))
        if during is not None:
            during((key[0], key[1], key[2]))

    monkeypatch.setattr(engine, "reconcile_named", record)
    rt.queue.workers = 1
    asyncio.run(engine._work(rt))
    return done


def test_pod_reconciles_wait_behind_objects_that_need_their_children(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def queue() -> None:
        engine.enqueue_now(rt, "Playground", "ns", "serving")  # its pod became Ready
        engine.enqueue_now(rt, "Service", "ns", "serving")
        engine.enqueue(rt, "Playground", "ns", "new")  # created, no children yet
        engine.enqueue(rt, "Service", "ns", "new", urgent=True)  # just created by its Playground
        engine.enqueue_now(rt, "Playground", "ns", "serving")  # another pod event: still once

    asyncio.run(queue())
    assert _drain(rt, monkeypatch) == [
        ("Service", "ns", "new"),
        ("Playground", "ns", "new"),
        ("Playground", "ns", "serving"),
        ("Service", "ns", "serving"),
    ]


def test_a_status_reconcile_is_not_held_back_longer_than_the_bound(rt: Runtime) -> None:
    async def queue() -> float:
        engine.enqueue_now(rt, "Playground", "ns", "serving")
        queued_at = asyncio.get_running_loop().time()
        engine.enqueue(rt, "Playground", "ns", "new")
        return queued_at

    queued_at = asyncio.run(queue())
    assert rt.queue.take(queued_at + LATER_MAX_WAIT - 0.1) == ("Playground", "ns", "new")
    newer = ("Playground", "ns", "other")
    rt.queue.waiting[newer] = None  # a steady stream of new objects
    assert rt.queue.take(queued_at + LATER_MAX_WAIT) == ("Playground", "ns", "serving")
    assert rt.queue.take(queued_at + LATER_MAX_WAIT) == newer
    assert rt.queue.take(queued_at + LATER_MAX_WAIT) is None


def test_an_event_that_needs_more_than_the_status_moves_a_waiting_reconcile_up(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def queue() -> None:
        engine.enqueue_now(rt, "Playground", "ns", "a")  # a pod event
        engine.enqueue(rt, "Playground", "ns", "b")
        engine.enqueue(rt, "Playground", "ns", "a")  # then its spec changed
        engine.enqueue(rt, "Playground", "ns", "c")

    asyncio.run(queue())
    assert _drain(rt, monkeypatch) == [
        ("Playground", "ns", "b"),
        ("Playground", "ns", "a"),
        ("Playground", "ns", "c"),
    ]


def test_an_object_queued_while_it_is_reconciled_runs_again_in_the_lane_it_was_queued_for(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def queue() -> None:
        engine.enqueue(rt, "Playground", "ns", "a")
        engine.enqueue(rt, "Playground", "ns", "b")
        engine.enqueue(rt, "Playground", "ns", "c")

    asyncio.run(queue())

    def meanwhile(key: Key) -> None:
        if key == ("Playground", "ns", "a") and not seen_a_again:
            seen_a_again.append(key)
            engine.enqueue_now(rt, *key)  # a pod event while it is reconciled: after b and c
        if key == ("Playground", "ns", "b") and not seen_b_again:
            seen_b_again.append(key)
            engine.enqueue_now(rt, *key)
            engine.enqueue(rt, *key)  # and a change: before c
        if key == ("Playground", "ns", "c"):
            engine.enqueue_now(rt, "Service", "ns", "z")

    seen_a_again: list[Key] = []
    seen_b_again: list[Key] = []
    assert _drain(rt, monkeypatch, meanwhile) == [
        ("Playground", "ns", "a"),
        ("Playground", "ns", "b"),
        ("Playground", "ns", "c"),
        ("Playground", "ns", "b"),
        ("Playground", "ns", "a"),
        ("Service", "ns", "z"),
    ]
    assert rt.queue.depth() == 0
