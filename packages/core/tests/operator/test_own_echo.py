"""Our own applies and status writes coming back through the watch reconcile nobody (a Service's
status write still reconciles its Playground, which shows it), and an inference Service its
Playground just applied is reconciled next, from the apply's answer (issue 15); anything else that
reaches a child or a Playground's inference Service still reconciles its owner, so a hand edit or a
deletion is repaired. The operator's real watch handlers and work queue, called as its watches call them,
against a stand-in for the API server's child writes (the real API server is in e2e/test_operator.py)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from llmaz.operator import engine
from llmaz.operator.handlers import children, playground, pods, service, watched_kinds
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import Creating, Runtime, owner_reference
from llmaz.render.plan import Plan

PLAYGROUND = {
    "apiVersion": "inference.llmaz.io/v1alpha1",
    "kind": "Playground",
    "metadata": {"name": "chat", "namespace": "ns", "uid": "pg-uid", "resourceVersion": "1"},
}
SERVICE = {
    "apiVersion": "inference.llmaz.io/v1alpha1",
    "kind": "Service",
    "metadata": {"name": "chat", "namespace": "ns", "uid": "svc-uid", "resourceVersion": "2"},
}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "chat", "namespace": "ns", "labels": {"app.kubernetes.io/managed-by": "llmaz"}},
    "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1}},
}


@pytest.fixture
def rt(make_runtime: Callable[[Any], Runtime], child_writes: Any) -> Runtime:
    return make_runtime(child_writes)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    calls: list[tuple[str, str, str]] = []

    def record(_rt: Runtime, kind: str, namespace: str, name: str, **_: Any) -> None:
        calls.append((kind, namespace, name))

    for module in (children, playground, service):
        monkeypatch.setattr(module, "enqueue", record)
    return calls


def _child_handler(rt: Runtime) -> Any:
    """The operator's own watch's handler of LeaderWorkerSet events."""
    return next(k.handler for k in watched_kinds(rt) if k.kind == "LeaderWorkerSet")


def _handler(rt: Runtime, body: dict[str, Any]) -> Any:
    """The operator's own watch's handler of ``body``'s kind."""
    return next(
        k.handler for k in watched_kinds(rt) if (k.api_version, k.kind) == (body["apiVersion"], body["kind"])
    )


def _deliver(rt: Runtime, kind: str, body: dict[str, Any]) -> None:
    """``body``'s event as the operator's own watch of its kind hands it over."""
    handler = _handler(rt, body)

    async def deliver() -> None:  # (as the watches do: on the event loop)
        handler(kind, body)

    asyncio.run(deliver())


def _applied(
    rt: Runtime, apply_children: Callable[..., None], owner: dict[str, Any], child: dict[str, Any]
) -> dict[str, Any]:
    """Apply ``child`` for ``owner`` through the engine; the object as the watch then brings it."""
    apply_children(rt, owner, Plan(objects=(child,)), [])
    live = copy.deepcopy(child)
    version = str(rt.kube.version)  # type: ignore[attr-defined]
    live["metadata"].update(
        resourceVersion=version, uid="child-uid", ownerReferences=[owner_reference(owner)]
    )
    return live


def test_a_created_child_coming_back_reconciles_nobody_but_an_edit_or_deletion_does(
    rt: Runtime, queued: list[tuple[str, str, str]], apply_children: Callable[..., None]
) -> None:
    lws_event = _child_handler(rt)
    live = _applied(rt, apply_children, SERVICE, LWS)
    lws_event("ADDED", live)
    assert queued == []

    edited = copy.deepcopy(live)
    edited["metadata"]["resourceVersion"] = "500"
    edited["spec"]["replicas"] = 7  # someone else's write: must be repaired
    lws_event("MODIFIED", edited)
    assert queued == [("Service", "ns", "chat")]

    lws_event("DELETED", edited)
    assert queued == [("Service", "ns", "chat")] * 2


def test_a_child_nobody_here_applied_reconciles_its_owner(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    live = copy.deepcopy(LWS)
    live["metadata"].update(resourceVersion="7", uid="child-uid", ownerReferences=[owner_reference(SERVICE)])
    _child_handler(rt)("ADDED", live)  # e.g. created by a previous leader
    assert queued == [("Service", "ns", "chat")]


def _service_as_rendered() -> dict[str, Any]:
    """The Playground's inference Service as its render has it (no uid, no resourceVersion)."""
    desired = copy.deepcopy(SERVICE)
    desired["metadata"].pop("uid")
    desired["metadata"].pop("resourceVersion")
    return desired


def _service_applied_by_playground(rt: Runtime, apply_children: Callable[..., None]) -> dict[str, Any]:
    return _applied(rt, apply_children, PLAYGROUND, _service_as_rendered())


def test_a_service_its_playground_applied_is_queued_first_with_the_apply_answer(
    rt: Runtime, apply_children: Callable[..., None]
) -> None:
    rt.queue.workers = rt.config.workers  # every worker busy: what is queued stays queued
    engine.enqueue(rt, "Playground", "ns", "older")
    engine.enqueue(rt, "Service", "ns", "chat")  # an event queued it before the apply's answer
    live = _service_applied_by_playground(rt, apply_children)
    key = ("Service", "ns", "chat")
    assert rt.fresh[key]["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    assert rt.queue.take() == key  # before the Playground queued earlier, and only once
    assert rt.queue.take() == ("Playground", "ns", "older")
    assert rt.queue.take() is None


def test_a_service_is_reconciled_from_the_apply_answer_until_the_watch_brings_it(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, apply_children: Callable[..., None]
) -> None:
    seen: list[str] = []

    async def record(_rt: Runtime, _idx: Any, snap: dict[str, Any]) -> None:
        seen.append(snap["metadata"]["resourceVersion"])

    class NoIndex:
        def service(self, namespace: str, name: str) -> None:
            return None

    monkeypatch.setattr(engine, "reconcile", record)
    rt.indexes = NoIndex()  # type: ignore[assignment]
    rt.queue.workers = rt.config.workers
    live = _service_applied_by_playground(rt, apply_children)
    asyncio.run(engine.reconcile_named(rt, "Service", "ns", "chat"))
    assert seen == [live["metadata"]["resourceVersion"]]
    asyncio.run(engine.reconcile_named(rt, "Service", "ns", "chat"))  # the answer is used once
    assert seen == [live["metadata"]["resourceVersion"]]


def test_a_playgrounds_service_coming_back_reconciles_nobody_once_reconciled_from_the_answer(
    rt: Runtime, queued: list[tuple[str, str, str]], apply_children: Callable[..., None]
) -> None:
    rt.queue.workers = rt.config.workers
    live = _service_applied_by_playground(rt, apply_children)
    _deliver(rt, "ADDED", live)
    assert queued == [("Service", "ns", "chat")]  # its reconcile from the answer has not run yet

    rt.fresh.clear()  # as that reconcile does
    _deliver(rt, "MODIFIED", live)
    assert queued == [("Service", "ns", "chat")]

    status = copy.deepcopy(live)
    status["metadata"]["resourceVersion"] = "600"
    status["status"] = {"conditions": [{"type": "Available", "status": "True"}]}
    _deliver(rt, "MODIFIED", status)  # its own status write
    assert queued[1:] == [("Service", "ns", "chat"), ("Playground", "ns", "chat")]


def _created_before_the_answer(rt: Runtime, owner: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` as the watch brings it while ``owner``'s create of it is still waiting for its
    answer (:attr:`Runtime.creates`)."""
    desired, digest = engine.desired_child(child, owner_reference(owner))
    rt.creates[ObjectKey.of(desired)] = Creating(digest)
    live = copy.deepcopy(desired)
    live["metadata"].update(resourceVersion="40", uid="child-uid")
    return live


def test_a_create_coming_back_before_its_answer_reconciles_nobody(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    ours = _created_before_the_answer(rt, PLAYGROUND, _service_as_rendered())
    _deliver(rt, "ADDED", ours)
    _child_handler(rt)("ADDED", _created_before_the_answer(rt, SERVICE, LWS))
    assert queued == []  # the answers queue the inference Service; nothing else has changed


def test_an_object_of_a_name_being_created_that_is_not_our_render_reconciles_its_owner(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    live = _created_before_the_answer(rt, SERVICE, LWS)
    live["metadata"]["annotations"]["llmaz.io/render-hash"] = "0123456789abcdef"  # someone else's
    _child_handler(rt)("ADDED", live)
    assert queued == [("Service", "ns", "chat")]

    theirs = _created_before_the_answer(rt, PLAYGROUND, _service_as_rendered())
    del theirs["metadata"]["annotations"]  # e.g. written by hand
    _deliver(rt, "ADDED", theirs)
    assert queued[1:] == [("Service", "ns", "chat"), ("Playground", "ns", "chat")]


PENDING = {
    "conditions": [
        {
            "type": "Available",
            "status": "False",
            "reason": "Pending",
            "message": "waiting for pods to be created",
            "lastTransitionTime": "2026-11-26T00:00:00Z",
        }
    ]
}


def _playgrounds_service() -> dict[str, Any]:
    """``SERVICE`` as the Playground's child (its controller owner reference)."""
    owned = copy.deepcopy(SERVICE)
    owned["metadata"]["ownerReferences"] = [owner_reference(PLAYGROUND)]
    return owned


def _status_written(rt: Runtime, owner: dict[str, Any]) -> dict[str, Any]:
    """Write ``PENDING`` as ``owner``'s status through the engine; the object as the watch brings it."""
    assert asyncio.run(engine.patch_status_once(rt, owner, copy.deepcopy(PENDING)))
    live = copy.deepcopy(owner)
    live["metadata"]["resourceVersion"] = str(rt.kube.version)  # type: ignore[attr-defined]
    live["status"] = copy.deepcopy(PENDING)
    return live


def test_our_own_status_write_coming_back_does_not_reconcile_the_playground_again(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    live = _status_written(rt, PLAYGROUND)
    _deliver(rt, "MODIFIED", live)
    assert queued == []

    edited = copy.deepcopy(live)
    edited["metadata"]["resourceVersion"] = "900"  # anyone else's write after ours
    edited["metadata"]["labels"] = {"team": "a"}
    _deliver(rt, "MODIFIED", edited)
    assert queued == [("Playground", "ns", "chat")]


def test_a_services_own_status_write_coming_back_reconciles_only_its_playground(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    live = _status_written(rt, _playgrounds_service())
    _deliver(rt, "MODIFIED", live)
    assert queued == [("Playground", "ns", "chat")]  # it shows the Service's status

    other = copy.deepcopy(live)
    other["metadata"]["resourceVersion"] = "900"  # someone else's write: the Service reconciles too
    _deliver(rt, "MODIFIED", other)
    assert queued[1:] == BOTH_OWNERS


BOTH_OWNERS = [("Service", "ns", "chat"), ("Playground", "ns", "chat")]


def _echo_before_the_answer(
    rt: Runtime,
    owner: dict[str, Any],
    changed: Callable[[dict[str, Any]], None] = lambda _live: None,
) -> None:
    """Write ``PENDING`` as ``owner``'s status through the engine, the stand-in API server's watch
    delivering the object that holds it to the operator's event handler before the patch's
    answer; ``changed`` edits that object first, as a concurrent write by someone else."""
    answer = rt.kube.patch_status_async

    async def echo_first(*args: Any) -> dict[str, Any]:
        live = copy.deepcopy(owner)
        live["metadata"]["resourceVersion"] = str(rt.kube.version + 1)  # type: ignore[attr-defined]
        live["status"] = copy.deepcopy(args[-1])
        changed(live)
        _handler(rt, live)("MODIFIED", live)
        return await answer(*args)

    rt.kube.patch_status_async = echo_first  # type: ignore[method-assign]
    assert asyncio.run(engine.patch_status_once(rt, owner, copy.deepcopy(PENDING)))
    assert not rt.status_writes  # nothing is kept of a write once it is answered


def test_our_status_write_coming_back_before_its_answer_does_not_reconcile_the_playground(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    _echo_before_the_answer(rt, PLAYGROUND)
    assert queued == []


@pytest.mark.parametrize(
    "someone_else",
    [
        lambda live: live["metadata"].update(labels={"team": "a"}),
        lambda live: live["metadata"].update(generation=2),
        lambda live: live["metadata"].update(deletionTimestamp="2026-11-27T00:00:00Z"),
        lambda live: live["status"]["conditions"][0].update(reason="Failed"),
    ],
    ids=["labels", "spec", "deletion", "status"],
)
def test_a_write_by_someone_else_while_our_status_write_waits_reconciles_the_playground(
    rt: Runtime,
    queued: list[tuple[str, str, str]],
    someone_else: Callable[[dict[str, Any]], None],
) -> None:
    _echo_before_the_answer(rt, PLAYGROUND, someone_else)
    assert queued == [("Playground", "ns", "chat")]


def test_a_services_status_write_coming_back_before_its_answer_reconciles_only_its_playground(
    rt: Runtime, queued: list[tuple[str, str, str]]
) -> None:
    _echo_before_the_answer(rt, _playgrounds_service())
    assert queued == [("Playground", "ns", "chat")]


@pytest.fixture
def pod_events(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> tuple[Callable[..., Coroutine[Any, Any, None]], list[tuple[str, str, str]]]:
    """The real pod event handler with a 0.05-s coalescing window, and what it queued."""
    monkeypatch.setattr(engine, "POD_COALESCE_SECONDS", 0.05)
    queued: list[tuple[str, str, str]] = []
    monkeypatch.setattr(engine, "enqueue", lambda _rt, *key, **_: queued.append(key))
    labels = {"llmaz.io/model-name": "qwen", "leaderworkerset.sigs.k8s.io/name": "chat"}
    handler = pods.watched_kind(rt).handler

    async def deliver(kind: str = "MODIFIED", *, ready: bool = False, version: int = 0) -> None:
        pod = {
            "metadata": {
                "name": "chat-0",
                "namespace": "ns",
                "labels": labels,
                "resourceVersion": str(version),
            },
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }
        handler(kind, pod)

    return deliver, queued


def test_a_burst_of_pod_events_reconciles_each_owner_once(pod_events: Any) -> None:
    """A pod created, bound and started within a second, as KWOK and a multi-host group's pods
    are: one reconcile of the inference Service and of the Playground, after the burst."""
    deliver, queued = pod_events

    async def burst() -> list[tuple[str, str, str]]:
        for version in range(4):
            await deliver(version=version)
        during = list(queued)
        await asyncio.sleep(0.2)
        return during

    assert asyncio.run(burst()) == []  # nothing until the burst is over
    assert sorted(queued) == sorted(BOTH_OWNERS)


def test_a_pod_becoming_ready_or_gone_reconciles_its_owners_at_once(pod_events: Any) -> None:
    """Availability is not kept waiting for the burst to end: the Ready pod's event queues both
    owners at once, and the pending timer of the earlier events is dropped (one reconcile each)."""
    deliver, queued = pod_events

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        await deliver(ready=False)  # started, not Ready: waits for the burst
        waiting = list(queued)
        await deliver(ready=True)
        at_once = list(queued)
        await asyncio.sleep(0.2)  # the earlier event's timer was dropped: nothing more
        await deliver("DELETED", ready=True)
        return waiting, at_once, list(queued)

    waiting, at_once, after_delete = asyncio.run(scenario())
    assert waiting == []
    assert at_once == BOTH_OWNERS
    assert after_delete == BOTH_OWNERS * 2
