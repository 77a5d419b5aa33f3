"""Serving pods: indexed by their LeaderWorkerSet, so a reconcile can diagnose why a model is not
serving (:func:`llmaz.render.diagnosis.diagnose`). Only pods carrying llmaz's model label are
watched: the selector is sent to the API server (:func:`llmaz.operator.handlers.lifecycle.configure`),
so other pods never reach the operator; these handlers take those that also carry the
LeaderWorkerSet name label (preheat pods go to :mod:`.preheat`).

A pod change reconciles the inference Service named after its LeaderWorkerSet and the Playground
of that name, if any, a second later (the changes of that second together), or at once when the
pod is Ready or deleted (availability may change); reconciles that find nothing new write nothing."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api.conventions import LABEL_MODEL_NAME
from llmaz.operator.engine import enqueue_now, enqueue_soon
from llmaz.operator.handlers._common import count_event, event_type, runtime
from llmaz.operator.runtime import IDX_PODS, Packed
from llmaz.render.objects import LWS_NAME_LABEL

GROUP_VERSION, PLURAL = "v1", "pods"
SELECTOR = LABEL_MODEL_NAME
"""Label selector of the pod watch: pods of llmaz workloads and preheat Jobs only (handlers filter
further: serving pods also carry the LeaderWorkerSet name label, preheat pods
``llmaz.io/preheat-model``)."""
_LABELS = {LABEL_MODEL_NAME: kopf.PRESENT, LWS_NAME_LABEL: kopf.PRESENT}


def pod_snapshot(body: kopf.Body) -> dict[str, Any]:
    """What diagnosis reads of a pod: metadata, container names and images, status (sharing the
    body's values: kept only packed, which copies)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    return {
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "labels", "annotations", "creationTimestamp", "deletionTimestamp")
            if k in meta
        },
        "spec": {
            part: [{"name": c.get("name"), "image": c.get("image")} for c in spec.get(part) or []]
            for part in ("initContainers", "containers")
        },
        "status": dict(body.get("status") or {}),  # copied when packed
    }


def _ready(pod: Any) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.index(GROUP_VERSION, PLURAL, id=IDX_PODS, labels=_LABELS, registry=registry)
    async def by_workload(
        body: kopf.Body, namespace: str | None, labels: kopf.Labels, **_: Any
    ) -> dict[Any, Any]:
        return {(namespace or "", labels[LWS_NAME_LABEL]): Packed(pod_snapshot(body))}

    @kopf.on.event(GROUP_VERSION, PLURAL, id="llmaz-pods", labels=_LABELS, registry=registry)
    async def pod_event(
        event: kopf.RawEvent, namespace: str | None, labels: kopf.Labels, memo: kopf.Memo, **kw: Any
    ) -> None:
        count_event(memo, kw)
        if event_type(event) is None:
            return  # initial listing: the owners' own listing reconciles them
        rt = runtime(memo, kw)
        ns, workload = namespace or "", str(labels[LWS_NAME_LABEL])
        # a pod Ready or gone may change availability: that is not kept waiting
        now = event_type(event) == "DELETED" or _ready(event.get("object") or {})
        for kind in ("Service", "Playground"):
            (enqueue_now if now else enqueue_soon)(rt, kind, ns, workload)
