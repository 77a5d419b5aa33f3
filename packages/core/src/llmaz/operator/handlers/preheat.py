"""Preheat (:mod:`llmaz.operator.preheat`): nodes by name with their labels, preheat Jobs and the
failure lines of their pods by the model they download, all watched by the operator's own
:class:`~llmaz.operator.watch.Watches`. A change of a model, of a node's labels (or a node added or
removed) or of a preheat Job reconciles the models concerned and queues their status refresh.

Nodes are watched metadata-only: preheat reads their names and labels, and most node events are
status updates (heartbeats, conditions) that carry nothing else it reads. Jobs and their pods are
watched in the preheat namespace only, filtered by the API server to those carrying
``llmaz.io/preheat-model``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from llmaz.operator import usage
from llmaz.operator.handlers._common import watched
from llmaz.operator.kube import ObjectKey
from llmaz.operator.preheat import marked, namespace, reconcile_preheat
from llmaz.operator.runtime import IDX_NODES, IDX_PREHEAT_JOBS, IDX_PREHEAT_PODS, Packed, Runtime, pack
from llmaz.operator.watch import Handler, WatchedKind, keyed
from llmaz.render.preheat import LABEL_PREHEAT_MODEL

JOB_SELECTOR = LABEL_PREHEAT_MODEL
"""Label selector of the preheat Job and pod watches (sent to the API server)."""


def _after_listing(rt: Runtime, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work`` in the background once every watch has listed (before that, a model's Jobs or
    the nodes may not be known yet, and a reconcile would create what exists)."""

    async def run() -> None:
        if rt.listed is not None:
            await rt.listed.wait()
        await work()

    rt.spawn(run())


async def _refresh(rt: Runtime, model: str) -> None:
    await reconcile_preheat(rt, model)
    usage.mark(rt, [("model", model)])


def _concerned(rt: Runtime) -> list[str]:
    """Models marked for preheating, and models that still have preheat Jobs."""
    assert rt.indexes is not None
    names = {s["metadata"]["name"] for s in rt.indexes.models() if marked(s)}
    return sorted(names | set(rt.indexes.preheat_models()))


def model_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """Every event of an OpenModel (the OpenModel watch's, :mod:`.openmodel`): its preheat Jobs
    reconciled once every watch has listed (its status refresh is queued by that watch)."""
    if change == "DELETED":
        return  # the garbage collector deletes the Jobs the model owned
    name = str(body["metadata"]["name"])
    _after_listing(rt, lambda: reconcile_preheat(rt, name))


def _node_entry(body: Mapping[str, Any]) -> Packed:
    meta = body.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels") if k in meta}
    return Packed({"apiVersion": "v1", "kind": "Node", "metadata": kept})


def _pod_entry(body: Mapping[str, Any]) -> Packed:
    """What is kept of a preheat pod: who it is and its loader's failure line, if any."""
    meta = body.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "labels") if k in meta}
    return Packed({"apiVersion": "v1", "kind": "Pod", "metadata": kept, "cause": loader_cause(body)})


def _model_of(body: Mapping[str, Any]) -> str | None:
    value = ((body.get("metadata") or {}).get("labels") or {}).get(LABEL_PREHEAT_MODEL)
    return None if value is None else str(value)


def watched_kinds(rt: Runtime) -> list[WatchedKind]:
    """Nodes (cluster-wide, metadata only), preheat Jobs and preheat pods (the preheat namespace)."""
    node_labels: dict[str, tuple[tuple[str, str], ...]] = {}

    def node_event(change: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        name = str(meta.get("name", ""))
        if change == "DELETED":
            node_labels.pop(name, None)
        else:
            labels = tuple(sorted((meta.get("labels") or {}).items()))
            if node_labels.get(name) == labels:
                return  # status updates: nothing preheat selects by
            node_labels[name] = labels
        if change is None:
            return  # initial listing: the models' own listing reconciles them
        for model in _concerned(rt):
            _after_listing(rt, lambda model=model: _refresh(rt, model))  # type: ignore[misc]

    def job_event(change: str | None, body: Mapping[str, Any]) -> None:
        model = _model_of(body)
        if change is None or model is None:
            return  # initial listing: the models' own listing reconciles them
        if change == "DELETED":
            rt.applied.pop(ObjectKey.of(body), None)
        _after_listing(rt, lambda: _refresh(rt, model))

    def pod_event(change: str | None, body: Mapping[str, Any]) -> None:
        model = _model_of(body)
        if change is None or model is None or not loader_cause(body):
            return  # only a failure line changes what the status says
        usage.mark(rt, [("model", model)])

    nodes = WatchedKind(
        api_version="v1",
        kind="Node",
        selector="",
        store_id=IDX_NODES,
        entries_of=lambda body: {body["metadata"]["name"]: _node_entry(body)},
        handler=node_event,
        resource=watched("", "nodes"),
        namespaced=False,
        metadata_only=True,
    )
    return [nodes, *_in_preheat_namespace(rt, job_event, pod_event)]


def _in_preheat_namespace(rt: Runtime, job_event: Handler, pod_event: Handler) -> list[WatchedKind]:
    """Preheat Jobs and their pods: in the preheat namespace only, by the model they download."""
    where = namespace(rt)
    kinds = (
        ("batch/v1", "Job", IDX_PREHEAT_JOBS, pack, job_event, watched("batch", "jobs")),
        ("v1", "Pod", IDX_PREHEAT_PODS, _pod_entry, pod_event, watched("", "pods")),
    )
    return [
        WatchedKind(
            api_version=api_version,
            kind=kind,
            selector=JOB_SELECTOR,
            store_id=store_id,
            entries_of=keyed(_model_of, kept),
            handler=handler,
            resource=resource,
            namespace=where,
        )
        for api_version, kind, store_id, kept, handler, resource in kinds
    ]


def loader_cause(pod: Any) -> str | None:
    """The termination message of a preheat pod's loader container that exited non-zero."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated") or {}
        if done.get("exitCode") and done.get("message"):
            return str(done["message"]).strip().splitlines()[0][:512]
    return None
