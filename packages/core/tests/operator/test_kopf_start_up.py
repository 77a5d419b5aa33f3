"""Start-up with more objects than ``workers``: kopf's real per-kind watcher and worker scheduler,
configured by :func:`llmaz.operator.handlers.lifecycle.configure`, fed a stand-in watch stream.

The stand-in processor does what kopf's own does for an indexed operator before it calls a handler:
it marks its object indexed, then waits until every object of every kind is indexed (issue 16: the
operator froze at start-up when one kind had more objects than kopf's worker limit).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import kopf
import pytest
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import watching
from kopf._cogs.structs.references import Resource
from kopf._core.reactor import queueing

from llmaz.operator import engine
from llmaz.operator.config import ModelLoader, OperatorConfig
from llmaz.operator.handlers import build_registry, watched_kinds
from llmaz.operator.handlers.lifecycle import NoDiffBase, configure
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import IDX_NODES, IDX_PODS, IDX_PREHEAT_JOBS, IDX_PREHEAT_PODS, Runtime

OBJECTS = 7
WORKERS = 2


def _settings(workers: int) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    configure(settings, SimpleNamespace(config=OperatorConfig(workers=workers)))  # type: ignore[arg-type]
    settings.queueing.idle_timeout = 0.1
    return settings


async def _process_listing(settings: kopf.OperatorSettings) -> set[str]:
    """Run kopf's watcher over a listing of OBJECTS objects; return the uids that reached a handler."""
    handled: set[str] = set()

    async def listing(**_: Any) -> AsyncIterator[Any]:
        for i in range(OBJECTS):
            yield {"type": None, "object": {"metadata": {"uid": f"uid-{i}", "name": f"p{i}"}}}
        yield watching.Bookmark.LISTED
        await asyncio.Event().wait()  # the watch stays open

    async def processor(
        *,
        raw_event: Any,
        resource_indexed: aiotoggles.Toggle | None,
        operator_indexed: aiotoggles.ToggleSet | None,
        **_: Any,
    ) -> None:
        if operator_indexed is not None and resource_indexed is not None:
            await operator_indexed.drop_toggle(resource_indexed)
        if operator_indexed is not None:
            await operator_indexed.wait_for(True)
        handled.add(raw_event["object"]["metadata"]["uid"])

    operator_indexed = aiotoggles.ToggleSet(all)
    resource_indexed = await operator_indexed.make_toggle(name="nodes listing")
    resource = kopf.Resource("", "v1", "nodes", namespaced=False)
    mp = pytest.MonkeyPatch()
    mp.setattr(queueing.watching, "infinite_watch", listing)
    task = asyncio.create_task(
        queueing.watcher(
            namespace=None,
            settings=settings,
            resource=resource,
            processor=processor,  # type: ignore[arg-type]
            operator_indexed=operator_indexed,
            resource_indexed=resource_indexed,
        )
    )
    try:
        for _ in range(200):  # bounded wait; progress, not speed, is what is checked
            if len(handled) == OBJECTS:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        mp.undo()
    return handled


def test_kopf_has_no_worker_limit_to_starve_the_start_up_listing() -> None:
    settings = _settings(WORKERS)
    assert settings.queueing.worker_limit is None
    assert asyncio.run(_process_listing(settings)) == {f"uid-{i}" for i in range(OBJECTS)}


def test_a_worker_limit_below_the_listing_would_freeze_it() -> None:
    """The control: kopf with a worker limit of WORKERS handles none of the OBJECTS (the freeze
    issue 16 found), so the test above proves something."""
    settings = _settings(WORKERS)
    settings.queueing.worker_limit = WORKERS
    assert asyncio.run(_process_listing(settings)) == set()


def _queue_runtime(snaps: dict[str, Any], workers: int) -> Runtime:
    """A Runtime whose indexes hold the Playgrounds ``snaps`` (by name) and nothing else."""
    indexes = SimpleNamespace(
        playground=lambda ns, name: snaps.get(name),
        playgrounds=lambda: list(snaps.values()),
        services=list,
        playground_count=lambda: len(snaps),
        service_count=lambda: 0,
    )
    return Runtime(
        config=OperatorConfig(workers=workers),
        plugins=None,  # type: ignore[arg-type]
        kube=None,  # type: ignore[arg-type]
        metrics=Metrics(kinds=("Playground", "Service")),
        identity="unit",
        indexes=indexes,  # type: ignore[arg-type]
    )


def _run_queue(rt: Runtime, reconciler: Any, targets: list[tuple[str, str, str]]) -> None:
    """Queue ``targets`` (reconciled by ``reconciler``) and wait until the work queue is empty."""

    async def run() -> None:
        engine.enqueue_many(rt, targets)
        while rt.queue.depth() or rt.queue.workers:
            await asyncio.sleep(0.01)

    mp = pytest.MonkeyPatch()
    mp.setitem(engine.RECONCILERS, "Playground", reconciler)
    try:
        asyncio.run(run())
    finally:
        mp.undo()


def test_reconciles_at_once_stay_within_workers() -> None:
    """``workers`` now bounds reconciles (not kopf workers): 7 resync targets, at most 2 at once."""
    running, peak = 0, 0

    async def reconciler(rt: Any, idx: Any, snap: Any) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    snaps = {
        f"p{i}": {"kind": "Playground", "metadata": {"uid": f"u{i}", "name": f"p{i}", "namespace": "ns"}}
        for i in range(OBJECTS)
    }
    rt = _queue_runtime(snaps, WORKERS)
    _run_queue(rt, reconciler, [("Playground", "ns", n) for n in snaps])
    assert peak == WORKERS
    assert rt.metrics.registry.get_sample_value("llmaz_queue_depth") == 0  # every reconcile left it
    managed = rt.metrics.registry.get_sample_value("llmaz_objects_managed", {"kind": "Playground"})
    assert managed == OBJECTS


def test_pods_jobs_and_nodes_are_watched_by_the_operator_with_llmaz_selectors_only() -> None:
    """The API server filters the watches: serving pods (model and LeaderWorkerSet labels both
    present) in the namespaces served, preheat pods and preheat Jobs in the preheat namespace
    only, never every pod or Job of the cluster; nodes, which preheat selects by their labels,
    every one but metadata only. kopf watches none of them."""
    rt = Runtime(
        config=OperatorConfig(model_loader=ModelLoader(preheat_namespace="models")),
        plugins=None,  # type: ignore[arg-type]
        kube=None,  # type: ignore[arg-type]
        metrics=Metrics(),
        identity="unit",
    )
    own = {(k.store_id, k.path(k.namespace)): k for k in watched_kinds(rt)}
    assert own[(IDX_PODS, "/api/v1/pods")].selector == "llmaz.io/model-name,leaderworkerset.sigs.k8s.io/name"
    for store_id, path in (
        (IDX_PREHEAT_PODS, "/api/v1/namespaces/models/pods"),
        (IDX_PREHEAT_JOBS, "/apis/batch/v1/namespaces/models/jobs"),
    ):
        assert own[(store_id, path)].selector == "llmaz.io/preheat-model"
        assert not own[(store_id, path)].metadata_only
    nodes = own[(IDX_NODES, "/api/v1/nodes")]
    assert (nodes.selector, nodes.namespaced, nodes.metadata_only) == ("", False, True)
    registry = build_registry()
    kinds = (Resource("", "v1", "pods"), Resource("batch", "v1", "jobs"), Resource("", "v1", "nodes"))
    for resource in kinds:
        assert not registry._watching.has_handlers(resource=resource), resource
        assert not registry._indexing.has_handlers(resource=resource), resource


def test_children_are_watched_by_the_operator_with_the_managed_by_selector() -> None:
    """LeaderWorkerSets, core Services, HPAs and ResourceClaimTemplates: watched by the operator's
    own watches (not kopf: no kopf handler takes them), only llmaz's reaching the operator;
    inference Services (users write them: they have the same plural as core Services) and
    Playgrounds, OpenModels and BackendRuntimes are the operator's too, with every object."""
    own = {k.path(None): k.selector for k in watched_kinds(_runtime())}
    for api_version, plural in (
        ("leaderworkerset.x-k8s.io/v1", "leaderworkersets"),
        ("v1", "services"),
        ("autoscaling/v2", "horizontalpodautoscalers"),
        ("resource.k8s.io/v1", "resourceclaimtemplates"),
    ):
        path = f"/apis/{api_version}/{plural}" if "/" in api_version else f"/api/{api_version}/{plural}"
        assert own[path] == "app.kubernetes.io/managed-by=llmaz", plural
        group, _, version = api_version.rpartition("/")
        resource = Resource(group, version, plural)
        registry = build_registry()
        assert not registry._watching.has_handlers(resource=resource), plural
        assert not registry._indexing.has_handlers(resource=resource), plural
    registry = build_registry()
    for path, group, plural in (
        ("/apis/inference.llmaz.io/v1alpha1/services", "inference.llmaz.io", "services"),
        ("/apis/inference.llmaz.io/v1alpha1/playgrounds", "inference.llmaz.io", "playgrounds"),
        ("/apis/inference.llmaz.io/v1alpha1/backendruntimes", "inference.llmaz.io", "backendruntimes"),
        ("/apis/llmaz.io/v1alpha1/openmodels", "llmaz.io", "openmodels"),
    ):
        assert own[path] == "", plural
        resource = Resource(group, "v1alpha1", plural)
        assert not registry._indexing.has_handlers(resource=resource), plural
        assert not registry._watching.has_handlers(resource=resource), plural


def _runtime() -> Runtime:
    return Runtime(config=OperatorConfig(), plugins=None, kube=None, metrics=Metrics(), identity="unit")  # type: ignore[arg-type]


def test_kopf_runs_the_lifecycle_only_and_would_need_no_diff_base() -> None:
    """kopf has the log-in, start-up and clean-up handlers and no resource handler at all (every
    watch is the operator's own); the diff base it would build for change handlers (a deep copy
    of every event's body) stays off."""
    registry = build_registry()
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert not registry._watching.get_all_handlers()
    assert not registry._indexing.get_all_handlers()
    assert registry._activities.get_all_handlers()  # the check sees handlers at all
    settings = _settings(WORKERS)
    assert isinstance(settings.persistence.diffbase_storage, NoDiffBase)


def test_a_burst_of_events_costs_one_reconcile_and_one_more_if_it_came_during_it() -> None:
    """Events only name the object: queued five times while waiting, it is reconciled once; queued
    while its reconcile runs, once more after (never twice at the same time)."""
    calls: list[str] = []
    running: set[str] = set()
    overlap = False

    async def reconciler(rt: Any, idx: Any, snap: Any) -> None:
        nonlocal overlap
        name = snap["metadata"]["name"]
        overlap = overlap or name in running
        running.add(name)
        calls.append(name)
        if len(calls) == 1:
            engine.enqueue(rt, "Playground", "ns", name)  # an event during the reconcile
            engine.enqueue(rt, "Playground", "ns", name)
        await asyncio.sleep(0.01)
        running.discard(name)

    snaps = {"a": {"kind": "Playground", "metadata": {"uid": "u", "name": "a", "namespace": "ns"}}}
    rt = _queue_runtime(snaps, 4)
    _run_queue(rt, reconciler, [("Playground", "ns", "a")] * 5)
    assert calls == ["a", "a"]
    assert not overlap
