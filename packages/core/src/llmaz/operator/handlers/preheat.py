"""Preheat (:mod:`llmaz.operator.preheat`): nodes indexed by name with their labels, preheat Jobs by
the model they download. A change of a model, of a node's labels (or a node added or removed) or of
a preheat Job reconciles the models concerned and queues their status refresh."""

from __future__ import annotations

import json
from typing import Any

import kopf

from llmaz.api import OpenModel
from llmaz.operator import usage
from llmaz.operator.handlers._common import count_event, event_type, runtime
from llmaz.operator.kube import ObjectKey
from llmaz.operator.preheat import marked, reconcile_preheat
from llmaz.operator.runtime import IDX_NODES, IDX_PREHEAT_JOBS, IDX_PREHEAT_PODS, Runtime, pack, plain
from llmaz.render.preheat import LABEL_PREHEAT_MODEL

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""Set by the Job controller on the pods of a Job."""

JOB_GROUP, JOB_VERSION, JOB_PLURAL = "batch", "v1", "jobs"
JOB_SELECTOR = LABEL_PREHEAT_MODEL
"""Label selector of the Job watch: preheat Jobs only (sent to the API server)."""
_JOB_LABELS = {LABEL_PREHEAT_MODEL: kopf.PRESENT}


async def listed(memo: kopf.Memo, kw: dict[str, Any]) -> Runtime:
    """The runtime (:func:`~llmaz.operator.handlers._common.runtime`), once the operator's own
    watches have listed the OpenModels these handlers read (kopf lists its kinds on its own)."""
    rt = runtime(memo, kw)
    if rt.listed is not None:
        await rt.listed.wait()
    return rt


async def _refresh(rt: Runtime, model: str) -> None:
    await reconcile_preheat(rt, model)
    usage.mark(rt, [("model", model)])


def _concerned(rt: Runtime) -> list[str]:
    """Models marked for preheating, and models that still have preheat Jobs."""
    assert rt.indexes is not None
    names = {s["metadata"]["name"] for s in rt.indexes.models() if marked(s)}
    return sorted(names | set(rt.indexes.preheat_models()))


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.index("v1", "nodes", id=IDX_NODES, registry=registry)
    async def node_labels(name: str, labels: kopf.Labels, **_: Any) -> dict[Any, Any]:
        return {name: {"name": name, "labels": dict(labels)}}

    node_seen: dict[str, str] = {}

    @kopf.on.event("v1", "nodes", id="llmaz-preheat-nodes", registry=registry)
    async def node_event(
        event: kopf.RawEvent, name: str, labels: kopf.Labels, memo: kopf.Memo, **kw: Any
    ) -> None:
        count_event(memo, kw)
        change = event_type(event)
        if change == "DELETED":
            node_seen.pop(name, None)
        else:
            digest = json.dumps(sorted(dict(labels).items()))
            if node_seen.get(name) == digest:
                return  # status heartbeats: nothing preheat selects by
            node_seen[name] = digest
        if change is None:
            return  # initial listing: the models' own listing reconciles them
        rt = await listed(memo, kw)
        for model in _concerned(rt):
            await _refresh(rt, model)

    @kopf.on.event(
        OpenModel.group, OpenModel.version, OpenModel.plural, id="llmaz-preheat-models", registry=registry
    )
    async def model_event(
        event: kopf.RawEvent, body: kopf.Body, name: str, memo: kopf.Memo, **kw: Any
    ) -> None:
        change = event_type(event)
        if change == "DELETED":
            return  # the garbage collector deletes the Jobs the model owned
        rt = await listed(memo, kw)
        await reconcile_preheat(rt, name, plain(body))
        if change is None and marked(body):
            # the model's status was refreshed without the nodes and Jobs until now (usage)
            usage.mark(rt, [("model", name)])

    @kopf.index(
        JOB_GROUP, JOB_VERSION, JOB_PLURAL, id=IDX_PREHEAT_JOBS, labels=_JOB_LABELS, registry=registry
    )
    def jobs_by_model(body: kopf.Body, labels: kopf.Labels, **_: Any) -> dict[Any, Any]:
        return {str(labels[LABEL_PREHEAT_MODEL]): pack(body)}

    @kopf.on.event(
        JOB_GROUP, JOB_VERSION, JOB_PLURAL, id="llmaz-preheat-jobs", labels=_JOB_LABELS, registry=registry
    )
    async def job_event(
        event: kopf.RawEvent, body: kopf.Body, labels: kopf.Labels, memo: kopf.Memo, **kw: Any
    ) -> None:
        count_event(memo, kw)
        change = event_type(event)
        if change is None:
            return  # initial listing: the models' own listing reconciles them
        rt = await listed(memo, kw)
        if change == "DELETED":
            rt.applied.pop(ObjectKey.of(body), None)
        await _refresh(rt, str(labels[LABEL_PREHEAT_MODEL]))

    # Preheat pods come through the pod watch (selector llmaz.io/model-name, which they carry): only
    # the loader's termination message is kept, the one-line cause PreheatFailed quotes.
    @kopf.index("v1", "pods", id=IDX_PREHEAT_PODS, labels=_JOB_LABELS, registry=registry)
    async def causes_by_model(body: kopf.Body, labels: kopf.Labels, **_: Any) -> dict[Any, Any]:
        return {
            str(labels[LABEL_PREHEAT_MODEL]): {
                "job": labels.get(JOB_NAME_LABEL, ""),
                "cause": loader_cause(body),
            }
        }

    @kopf.on.event("v1", "pods", id="llmaz-preheat-pods", labels=_JOB_LABELS, registry=registry)
    async def pod_event(
        event: kopf.RawEvent, body: kopf.Body, labels: kopf.Labels, memo: kopf.Memo, **kw: Any
    ) -> None:
        count_event(memo, kw)  # (the serving pods' own handler counts theirs: disjoint labels)
        if event_type(event) is None or not loader_cause(body):
            return  # only a failure line changes what the status says
        usage.mark(await listed(memo, kw), [("model", str(labels[LABEL_PREHEAT_MODEL]))])


def loader_cause(pod: Any) -> str | None:
    """The termination message of a preheat pod's loader container that exited non-zero."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated") or {}
        if done.get("exitCode") and done.get("message"):
            return str(done["message"]).strip().splitlines()[0][:512]
    return None
