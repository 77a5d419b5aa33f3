"""Serving pods: indexed by their LeaderWorkerSet, so a reconcile can diagnose why a model is not
serving (:func:`llmaz.render.diagnosis.diagnose`). Watched by the operator's own
:class:`~llmaz.operator.watch.Watches`, not kopf: only pods carrying llmaz's model label and the
LeaderWorkerSet name label reach the operator (:data:`SELECTOR`, sent to the API server; preheat
pods go to :mod:`.preheat`).

A pod change reconciles the inference Service named after its LeaderWorkerSet and the Playground
of that name, if any, a second later (the changes of that second together), or at once when the
pod is Ready or deleted (availability may change); reconciles that find nothing new write nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaz.api.conventions import LABEL_MODEL_NAME
from llmaz.operator.engine import enqueue_now, enqueue_soon
from llmaz.operator.handlers._common import watched
from llmaz.operator.runtime import IDX_PODS, Packed, Runtime
from llmaz.operator.watch import WatchedKind, keyed
from llmaz.render.objects import LWS_NAME_LABEL

GROUP_VERSION, PLURAL = "v1", "pods"
SELECTOR = f"{LABEL_MODEL_NAME},{LWS_NAME_LABEL}"
"""Label selector of the serving pods' watch: pods of llmaz workloads only (preheat pods, which
have no LeaderWorkerSet, are kopf's: :mod:`.preheat`)."""


def pod_snapshot(body: Mapping[str, Any]) -> dict[str, Any]:
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


def _key(body: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = body.get("metadata") or {}
    workload = (meta.get("labels") or {}).get(LWS_NAME_LABEL)
    return (meta.get("namespace") or "", str(workload)) if workload else None


def watched_kind(rt: Runtime) -> WatchedKind:
    """Serving pods for :class:`~llmaz.operator.watch.Watches`: indexed as :data:`IDX_PODS`, only
    those with both labels of :data:`SELECTOR` sent by the API server."""

    def pod_event(kind: str | None, body: Mapping[str, Any]) -> None:
        if kind is None:
            return  # initial listing: the owners' own listing reconciles them
        key = _key(body)
        if key is None:
            return
        # a pod Ready or gone may change availability: that is not kept waiting
        now = kind == "DELETED" or _ready(body)
        for owner in ("Service", "Playground"):
            (enqueue_now if now else enqueue_soon)(rt, owner, *key)

    return WatchedKind(
        api_version=GROUP_VERSION,
        kind="Pod",
        selector=SELECTOR,
        store_id=IDX_PODS,
        entries_of=keyed(_key, lambda body: Packed(pod_snapshot(body))),
        handler=pod_event,
        resource=watched("", PLURAL),
    )
