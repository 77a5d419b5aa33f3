"""Which status writes and Events a rollout costs (issue 15): the engine's decisions in
:func:`llmaz.operator.engine.write_status`, against a recording stand-in for the API server (the
real one is in e2e/test_operator.py and the operator benchmark)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from llmaz.operator import engine
from llmaz.operator.config import OperatorConfig
from llmaz.operator.kube import ObjectKey
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Creating, Runtime
from llmaz.operator.status import Observation

SETTLE, DETAIL, BUSY = 0.05, 0.4, 0.6


class RecordingKube:
    """Stand-in for the API server: records status patches and Events, answers a new
    resourceVersion per write."""

    def __init__(self) -> None:
        self.patches: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        self.version = 100

    def patch_status(self, api_version: str, kind: str, ns: str | None, name: str, status: Any) -> Any:
        self.version += 1
        reason = next(c["reason"] for c in status["conditions"] if c["type"] == "Available")
        self.patches.append(reason)
        return {"metadata": {"resourceVersion": str(self.version)}}

    def post_event(self, event: dict[str, Any]) -> None:
        self.events.append((event["involvedObject"]["kind"], event["reason"], event["type"]))

    # the reconciles write on the event loop (Kube.*_async): the same records
    async def patch_status_async(self, *args: Any) -> Any:
        return self.patch_status(*args)

    async def post_event_async(self, event: dict[str, Any]) -> None:
        self.post_event(event)


@pytest.fixture(autouse=True)
def short_holds() -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    mp.setattr(engine, "SETTLE_SECONDS", SETTLE)
    mp.setattr(engine, "DETAIL_SETTLE_SECONDS", DETAIL)
    mp.setattr(engine, "BUSY_HOLD_SECONDS", BUSY)
    mp.setattr(engine, "BUSY_RECHECK_SECONDS", SETTLE)
    yield
    mp.undo()


def _runtime(kube: RecordingKube) -> Runtime:
    return Runtime(
        config=OperatorConfig(),
        plugins=None,  # type: ignore[arg-type]
        kube=kube,  # type: ignore[arg-type]
        metrics=Metrics(kinds=("Playground", "Service")),
        identity="unit",
    )


def _creates_in_flight(rt: Runtime, count: int) -> None:
    """``count`` child creates in flight, as :func:`llmaz.operator.engine.apply_children` records them."""
    for i in range(count):
        rt.creates[ObjectKey("v1", "Service", "ns", f"other{i}-lb")] = Creating("digest")


def _owner(kind: str = "Playground", owned_by_playground: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "chat", "namespace": "ns", "uid": f"uid-{kind}", "resourceVersion": "1"}
    if owned_by_playground:
        meta["ownerReferences"] = [{"kind": "Playground", "name": "chat", "uid": "p", "controller": True}]
    return {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": kind, "metadata": meta}


def _seen(reason: str, message: str = "", *, ready: int = 0, failing: bool = False) -> Observation:
    return Observation(
        generation=1,
        desired=1,
        ready=ready,
        available=reason == "Available",
        workload=(reason, message or reason),
        failing=failing,
    )


class Rollout:
    """Feeds observations to write_status the way reconciles do: each one sees the status the
    previous write left (the watch caught up)."""

    def __init__(self, owner: dict[str, Any]) -> None:
        self.kube = RecordingKube()
        self.rt = _runtime(self.kube)
        self.owner = owner

    async def see(self, seen: Observation) -> None:
        before = len(self.kube.patches)
        await engine.write_status(self.rt, self.owner, seen)
        if len(self.kube.patches) > before:
            self.owner = dict(self.owner)
            self.owner["status"] = engine.compute_status(
                self.owner["kind"], seen, self.owner.get("status"), self.rt.clock()
            )
            meta = dict(self.owner["metadata"])
            meta["resourceVersion"] = str(self.kube.version)
            self.owner["metadata"] = meta


def test_a_pod_ready_within_the_moment_costs_one_status_write_and_no_event() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner())
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await r.see(_seen("Pending", "pod chat-0 is Pending"))
        await r.see(_seen("Available", ready=1))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["Available"]
    assert r.kube.events == []


def test_a_pending_that_lasts_is_written_and_becoming_available_has_no_event() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner())
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await asyncio.sleep(SETTLE * 3)  # held long enough: the next reconcile writes it
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await r.see(_seen("Available", ready=1))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["Pending", "Available"]
    assert r.kube.events == []  # a rollout step: the condition says it


def test_a_problem_has_a_warning_and_its_end_a_normal_event() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner())
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await r.see(_seen("Unschedulable", "no node has a free GPU", failing=True))
        await r.see(_seen("Pending", "pod chat-0 is Pending"))  # a node came: written at once
        await r.see(_seen("Available", ready=1))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["Pending", "Unschedulable", "Pending", "Available"]
    assert r.kube.events == [("Playground", "Unschedulable", "Warning"), ("Playground", "Pending", "Normal")]


def test_a_pending_waits_while_children_are_being_created_then_is_written() -> None:
    """Creating children is what a rollout of many Playgrounds waits for: a held progress-only
    status waits on while any child create is in flight, and is written once none is."""

    async def scenario() -> tuple[list[str], list[str]]:
        r = Rollout(_owner())
        _creates_in_flight(r.rt, 3)  # other Playgrounds' children are being created
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await asyncio.sleep(SETTLE * 3)  # the hold is over, the creates are not
        await r.see(_seen("Pending", "waiting for pods to be created"))
        while_busy = list(r.kube.patches)
        r.rt.creates.clear()
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending", "waiting for pods to be created"))
        return while_busy, list(r.kube.patches)

    assert asyncio.run(scenario()) == ([], ["Pending"])


def test_a_pending_waits_for_creates_only_so_long() -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        r = Rollout(_owner())
        _creates_in_flight(r.rt, 1)  # creates that never end
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending", "waiting for pods to be created"))
        early = list(r.kube.patches)
        await asyncio.sleep(SETTLE + BUSY)
        await r.see(_seen("Pending", "waiting for pods to be created"))
        return early, list(r.kube.patches)

    assert asyncio.run(scenario()) == ([], ["Pending"])


def test_an_available_status_never_waits_for_creates() -> None:
    async def scenario() -> list[str]:
        r = Rollout(_owner())
        _creates_in_flight(r.rt, 5)
        await r.see(_seen("Available", ready=1))
        return list(r.kube.patches)

    assert asyncio.run(scenario()) == ["Available"]


def test_a_message_only_change_waits_longer_than_a_new_reason() -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        r = Rollout(_owner())
        await r.see(_seen("Pending", "waiting for pods to be created"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending", "waiting for pods to be created"))
        # the same reason with a new message: held for DETAIL, not SETTLE
        await r.see(_seen("Pending", "pod chat-0 is Pending"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending", "pod chat-0 is Pending"))
        after_settle = list(r.kube.patches)
        # a new reason shortens the hold to SETTLE
        await r.see(_seen("Loading", "model-loader downloading"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Loading", "model-loader downloading"))
        after_loading = list(r.kube.patches)
        await r.see(_seen("Loading", "model-loader downloading 50 %"))
        await asyncio.sleep(DETAIL * 1.5)
        await r.see(_seen("Loading", "model-loader downloading 50 %"))
        return after_settle, after_loading, list(r.kube.patches)

    after_settle, after_loading, final = asyncio.run(scenario())
    assert after_settle == ["Pending"]
    assert after_loading == ["Pending", "Loading"]
    assert final == ["Pending", "Loading", "Loading"]


def test_a_first_status_a_user_must_act_on_is_written_at_once_with_a_warning() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner())
        await r.see(_seen("ImagePullBackOff", "no such image", failing=True))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["ImagePullBackOff"]
    assert r.kube.events == [("Playground", "ImagePullBackOff", "Warning")]


def test_a_playgrounds_inference_service_writes_no_progress_and_posts_only_warnings() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner("Service", owned_by_playground=True))
        await r.see(_seen("Pending"))
        await asyncio.sleep(SETTLE * 3)  # held past the moment: still not written (the Playground is)
        await r.see(_seen("Pending"))
        await r.see(_seen("Loading", "model-loader downloading"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Loading", "model-loader downloading"))
        await r.see(_seen("Available", ready=1))
        await r.see(_seen("Pending", "pod chat-0 is Pending"))  # availability lost: written
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Starting", "engine starting"))  # progress after the loss: not written
        await r.see(_seen("CrashLoopBackOff", "engine exits", failing=True))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["Available", "Pending", "CrashLoopBackOff"]
    assert r.kube.events == [("Service", "CrashLoopBackOff", "Warning")]


def test_a_standalone_inference_service_has_its_events() -> None:
    async def scenario() -> Rollout:
        r = Rollout(_owner("Service"))
        await r.see(_seen("Pending"))
        await asyncio.sleep(SETTLE * 3)
        await r.see(_seen("Pending"))
        await r.see(_seen("CrashLoopBackOff", "engine exits", failing=True))
        await r.see(_seen("Available", ready=1))
        return r

    r = asyncio.run(scenario())
    assert r.kube.patches == ["Pending", "CrashLoopBackOff", "Available"]
    assert r.kube.events == [("Service", "CrashLoopBackOff", "Warning"), ("Service", "Available", "Normal")]
