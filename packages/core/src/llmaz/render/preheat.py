"""Preheat: an OpenModel marked ``llmaz.io/model-preheat: "true"`` is downloaded into the shared
cache of every node its flavors select, before any Playground asks for it.

One loader Job per selected node, pinned to it with ``nodeName``; its container is the very
``model-loader`` init container a serving pod gets (:func:`llmaz.render.service.loader_container`:
same image, command, environment, credentials and cache volume), so it writes the folder of the
cache that serving pods later find complete (:func:`llmaz.loader.layout.cached_path`).

Pure: the operator passes the nodes it watches and the Jobs it sees; this module says which Jobs
should exist and what their state means for the OpenModel's ``Preheated`` condition.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from llmaz.api import OpenModel
from llmaz.api.conventions import ANNOTATION_MODEL_PREHEAT, LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.render.cache import SharedCache
from llmaz.render.service import loader_container
from llmaz.render.sources import resolve_source

PREHEAT_KEY: Final = ANNOTATION_MODEL_PREHEAT
"""Label (or, as llmaz declared it, annotation) that asks for a model to be preheated; value ``"true"``."""
LABEL_PREHEAT_MODEL: Final = "llmaz.io/preheat-model"
"""On preheat Jobs and their pods: the OpenModel they download (the operator watches this label)."""
ANNOTATION_PREHEAT_NODE: Final = "llmaz.io/preheat-node"
"""On preheat Jobs: the node whose cache they fill (node names may be longer than a label value)."""
ANNOTATION_PREHEAT_DIGEST: Final = "llmaz.io/preheat-digest"
"""On preheat Jobs: digest of the rendered Job; a Job whose digest is not the desired one is
replaced (a Job's pod template cannot be changed in place)."""
JOB_API_VERSION: Final = "batch/v1"
BACKOFF_LIMIT: Final = 2
"""Pod retries of a preheat Job; the loader retries each request itself and resumes partial files."""

REASON_PREHEATING: Final = "Preheating"
REASON_PREHEATED: Final = "Preheated"
REASON_FAILED: Final = "PreheatFailed"
REASON_NO_CACHE: Final = "SharedCacheNotConfigured"
REASON_NO_NODES: Final = "NoMatchingNodes"
REASON_NOTHING_TO_LOAD: Final = "NothingToLoad"
REASON_INVALID_SOURCE: Final = "InvalidModelSource"
REASONS: Final = (
    REASON_PREHEATING,
    REASON_PREHEATED,
    REASON_FAILED,
    REASON_NO_CACHE,
    REASON_NO_NODES,
    REASON_NOTHING_TO_LOAD,
    REASON_INVALID_SOURCE,
)
"""Every reason of the ``Preheated`` condition."""
LISTED: Final = 5
"""Nodes named in a condition message (the rest are counted)."""


@dataclass(frozen=True)
class Node:
    """What preheat reads of a node."""

    name: str
    labels: Mapping[str, str]


def requested(model: OpenModel) -> bool:
    """Whether ``model`` asks to be preheated (label, or llmaz's annotation, set to ``"true"``)."""
    meta = model.metadata
    return "true" in ((meta.labels or {}).get(PREHEAT_KEY), (meta.annotations or {}).get(PREHEAT_KEY))


def selects(model: OpenModel, node: Node) -> bool:
    """Whether a flavor of ``model`` selects ``node`` (its whole ``nodeSelector`` matches); a model
    without flavors runs anywhere, so it selects every node."""
    config = model.spec.inference_config
    flavors = config.flavors if config is not None else None
    if not flavors:
        return True
    return any(
        all(node.labels.get(key) == value for key, value in (flavor.node_selector or {}).items())
        for flavor in flavors
    )


def selected_nodes(model: OpenModel, nodes: Iterable[Node]) -> list[Node]:
    """The nodes ``model`` is preheated on, by name."""
    return sorted((n for n in nodes if selects(model, n)), key=lambda n: n.name)


def job_name(model_name: str, node_name: str) -> str:
    """``<model>-preheat-<10 hex digits>``, at most 63 characters (the Job controller copies it into
    a label); the digits hash the model and node names, so two long model names sharing their first
    44 characters still get Jobs of their own."""
    digest = hashlib.sha256(f"{model_name}\0{node_name}".encode()).hexdigest()[:10]
    return f"{model_name[: 63 - 19].rstrip('-')}-preheat-{digest}"


def needs_loader(model: OpenModel) -> bool:
    """Whether the model's source is downloaded at all (hubs and object stores); raises
    :class:`~llmaz.render.errors.InvalidModelSource` for a source that cannot be used."""
    return resolve_source(model, 0, field="spec.source").needs_loader(skip_loader=False)


def render_preheat_jobs(
    model: OpenModel,
    nodes: Iterable[Node],
    *,
    namespace: str,
    cache: SharedCache,
    loader_image: str,
) -> list[dict[str, Any]]:
    """One loader Job per node ``model`` is preheated on (none when its source needs no loader).

    Raises :class:`~llmaz.render.errors.InvalidModelSource` when the source cannot be used.
    Carries no ``ownerReferences``; the operator adds the OpenModel's.
    """
    source = resolve_source(model, 0, field="spec.source")
    if not source.needs_loader(skip_loader=False):
        return []
    container = loader_container(source, loader_image, None, cache)
    labels = {MANAGED_BY: MANAGER, LABEL_PREHEAT_MODEL: model.name, LABEL_MODEL_NAME: model.name}
    jobs = []
    for node in selected_nodes(model, nodes):
        spec: dict[str, Any] = {
            "backoffLimit": BACKOFF_LIMIT,
            # The loader retries with backoff and resumes by itself: when it exits non-zero (401,
            # 404, disk full, corrupt file) another pod would fail the same way, so the Job fails
            # at once. A pod evicted or preempted is retried without counting.
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": container["name"],
                            "operator": "NotIn",
                            "values": [0],
                        },
                    },
                ]
            },
            "template": {
                "metadata": {"labels": {LABEL_PREHEAT_MODEL: model.name, LABEL_MODEL_NAME: model.name}},
                "spec": {
                    # pinned to the node: no scheduling, and its taints (GPU nodes have some) are
                    # tolerated, because filling this node's cache is the point
                    "nodeName": node.name,
                    "restartPolicy": "Never",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [container],
                    "volumes": [cache.volume()],
                },
            },
        }
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
        jobs.append(
            {
                "apiVersion": JOB_API_VERSION,
                "kind": "Job",
                "metadata": {
                    "name": job_name(model.name, node.name),
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {ANNOTATION_PREHEAT_NODE: node.name, ANNOTATION_PREHEAT_DIGEST: digest},
                },
                "spec": spec,
            }
        )
    return jobs


# --------------------------------------------------------------------------------- status


@dataclass(frozen=True)
class Report:
    """What the Jobs of one model say, for its ``Preheated`` condition and ``status.preheat``."""

    done: bool
    reason: str
    message: str
    nodes: int = 0
    preheated: int = 0
    failed: int = 0

    def counts(self) -> dict[str, int]:
        return {"nodes": self.nodes, "preheated": self.preheated, "failed": self.failed}


def _job_condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def _names(names: Sequence[str]) -> str:
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


def report(
    desired: Sequence[Mapping[str, Any]],
    live: Iterable[Mapping[str, Any]],
    causes: Mapping[str, str] | None = None,
) -> Report:
    """The preheat state of a model from its desired Jobs (:func:`render_preheat_jobs`) and the
    Jobs as last seen. A live Job counts only when it is the desired one (same digest), so a model
    whose source changed is not reported preheated from the old download. ``causes``: the loader's
    one-line failure cause (its termination message) by Job name, put before the Job's own message.
    """
    seen = {str(j["metadata"]["name"]): j for j in live}
    total = len(desired)
    if not total:
        return Report(False, REASON_NO_NODES, "no node matches the nodeSelector of any flavor of the model")
    done: list[str] = []
    failed: list[str] = []
    waiting: list[str] = []
    for want in desired:
        meta = want["metadata"]
        node = meta["annotations"][ANNOTATION_PREHEAT_NODE]
        job = seen.get(meta["name"])
        if job is None or _digest_of(job) != meta["annotations"][ANNOTATION_PREHEAT_DIGEST]:
            waiting.append(node)
        elif _job_condition(job, "Complete") is not None:
            done.append(node)
        elif (broken := _job_condition(job, "Failed")) is not None:
            why = broken.get("message") or broken.get("reason") or "the Job failed"
            job_ref = f"Job {meta['namespace']}/{meta['name']}"
            cause = (causes or {}).get(meta["name"])
            failed.append(
                f"node {node}: {cause} ({job_ref}: {why})" if cause else f"node {node}: {why} ({job_ref})"
            )
        else:
            waiting.append(node)
    counts = {"nodes": total, "preheated": len(done), "failed": len(failed)}
    if failed:
        message = f"{len(failed)} of {total} nodes failed: " + "; ".join(failed[:LISTED])
        return Report(False, REASON_FAILED, message, **counts)
    if waiting:
        message = f"{len(done)} of {total} nodes preheated; downloading on {_names(waiting)}"
        return Report(False, REASON_PREHEATING, message, **counts)
    plural = "s" if total != 1 else ""
    return Report(
        True, REASON_PREHEATED, f"in the shared cache of {total} node{plural}: {_names(done)}", **counts
    )


def _digest_of(job: Mapping[str, Any]) -> str | None:
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PREHEAT_DIGEST)
    return str(value) if value is not None else None
