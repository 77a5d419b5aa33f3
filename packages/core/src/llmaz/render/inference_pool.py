"""Gateway API Inference Extension objects (v1: the API gateways read since its GA release).

Per workload:

* an ``InferencePool`` (``inference.networking.k8s.io/v1``) selecting its serving pods (the leader
  of each LeaderWorkerSet group, like ``<name>-lb``) on the serving port, handing endpoint choice to
  the endpoint picker Service ``<name>-epp``;
* an ``InferenceObjective`` (``inference.networking.x-k8s.io/v1alpha2``) when the workload gives a
  priority: requests naming it in the ``x-gateway-inference-objective`` header get that priority;
* an ``InferenceModelRewrite`` (same group) when it gives target models: requests for the model are
  rewritten to those names, split by weight (LoRA adapters, canaries).

Inference Extension v0.x had ``inference.networking.x-k8s.io/v1alpha2`` ``InferencePool`` and
``InferenceModel`` instead, which earlier llmaz releases wrote: :data:`RETIRED_KINDS` lists them so
that the operator removes what it wrote of them.
"""

from __future__ import annotations

from typing import Any

from llmaz.render.endpoint_picker import endpoint_picker_name
from llmaz.render.errors import RenderError
from llmaz.render.objects import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, metadata
from llmaz.render.workload import Workload

__all__ = [
    "ANNOTATION_CRITICALITY",
    "ANNOTATION_PRIORITY",
    "ANNOTATION_TARGET_MODELS",
    "CRITICALITY_PRIORITY",
    "DEFAULT_ENDPOINT_PICKER_PORT",
    "INFERENCE_API_VERSION",
    "INFERENCE_GROUP",
    "INFERENCE_X_API_VERSION",
    "OBJECTIVE_HEADER",
    "RETIRED_KINDS",
    "InvalidInferenceModel",
    "pool_backend_ref",
    "render_inference_pool",
]

INFERENCE_GROUP = "inference.networking.k8s.io"
INFERENCE_API_VERSION = f"{INFERENCE_GROUP}/v1"
"""``InferencePool``: GA since Inference Extension v1.0."""
INFERENCE_X_API_VERSION = "inference.networking.x-k8s.io/v1alpha2"
"""``InferenceObjective`` and ``InferenceModelRewrite``: alpha in Inference Extension v1.x."""
RETIRED_KINDS: tuple[tuple[str, str], ...] = (
    (INFERENCE_X_API_VERSION, "InferencePool"),
    (INFERENCE_X_API_VERSION, "InferenceModel"),
)
"""Kinds earlier llmaz releases wrote (Inference Extension v0.5): found labelled as ours, deleted."""
OBJECTIVE_HEADER = "x-gateway-inference-objective"
"""Request header naming the ``InferenceObjective`` a request belongs to."""
ANNOTATION_PRIORITY = "llmaz.io/priority"
"""A whole number: the ``InferenceObjective``'s priority (higher is served first; unset is 0)."""
ANNOTATION_CRITICALITY = "llmaz.io/criticality"
"""Deprecated (Inference Extension v0.5's ``InferenceModel``): ``Critical``, ``Standard`` or
``Sheddable``, read as the priority :data:`CRITICALITY_PRIORITY` gives."""
ANNOTATION_TARGET_MODELS = "llmaz.io/target-models"
"""``name=weight,name=weight``: the ``InferenceModelRewrite``'s targets (traffic split by weight)."""
CRITICALITY_PRIORITY: dict[str, int] = {"Critical": 1, "Standard": 0, "Sheddable": -1}
"""The priority a deprecated criticality stands for: Standard is what an unset priority means,
Critical is served before it and Sheddable after it, as before."""
MAX_WEIGHT = 1_000_000
MAX_PRIORITY = 2**31 - 1
DEFAULT_ENDPOINT_PICKER_PORT = 9002
"""gRPC port of the endpoint picker (ext-proc) Service, as the Inference Extension deploys it."""


class InvalidInferenceModel(RenderError):
    """An Inference Extension annotation has a value the Inference Extension would refuse."""

    condition_reason = "InvalidAnnotation"


def _error(w: Workload, annotation: str, message: str) -> InvalidInferenceModel:
    return InvalidInferenceModel(f"metadata.annotations[{annotation}]", message, kind=w.kind, name=w.name)


def _priority(w: Workload) -> int | None:
    raw = w.annotations.get(ANNOTATION_PRIORITY)
    criticality = w.annotations.get(ANNOTATION_CRITICALITY)
    if raw is not None and criticality is not None:
        raise _error(
            w,
            ANNOTATION_CRITICALITY,
            f"set together with {ANNOTATION_PRIORITY}: remove it (it is the deprecated form of "
            f"{ANNOTATION_PRIORITY})",
        )
    if criticality is not None:
        if criticality not in CRITICALITY_PRIORITY:
            raise _error(
                w,
                ANNOTATION_CRITICALITY,
                f"criticality {criticality!r} is not one of {', '.join(CRITICALITY_PRIORITY)} "
                f"(deprecated: set {ANNOTATION_PRIORITY} to a whole number instead)",
            )
        return CRITICALITY_PRIORITY[criticality]
    if raw is None:
        return None
    text = raw.strip()
    if not text.lstrip("+-").isdigit() or not -MAX_PRIORITY - 1 <= int(text) <= MAX_PRIORITY:
        raise _error(
            w,
            ANNOTATION_PRIORITY,
            f"{raw!r} is not a whole number from {-MAX_PRIORITY - 1} to {MAX_PRIORITY} "
            "(higher is served first, unset is 0)",
        )
    return int(text)


def _target_models(w: Workload) -> list[dict[str, Any]]:
    raw = w.annotations.get(ANNOTATION_TARGET_MODELS, "")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        name, sep, weight = part.partition("=")
        name = name.strip()
        if not sep or not name or not weight.strip().isdigit():
            raise _error(w, ANNOTATION_TARGET_MODELS, f"{part!r} is not name=weight (weight a whole number)")
        value = int(weight)
        if not 1 <= value <= MAX_WEIGHT:
            raise _error(
                w, ANNOTATION_TARGET_MODELS, f"weight of {name!r} is {value}; it must be 1..{MAX_WEIGHT}"
            )
        if name in seen:
            raise _error(w, ANNOTATION_TARGET_MODELS, f"target model {name!r} is listed twice")
        seen.add(name)
        out.append({"modelRewrite": name, "weight": value})
    return out


def pool_backend_ref(w: Workload) -> dict[str, Any]:
    """A reference to the workload's ``InferencePool`` (a route's backend, an objective's or a
    rewrite's pool)."""
    return {"group": INFERENCE_GROUP, "kind": "InferencePool", "name": w.name}


def render_inference_pool(
    w: Workload,
    *,
    endpoint_picker: str | None = None,
    endpoint_picker_port: int = DEFAULT_ENDPOINT_PICKER_PORT,
    fail_open: bool = False,
) -> list[dict[str, Any]]:
    """The ``InferencePool`` of one workload, with its ``InferenceObjective`` and
    ``InferenceModelRewrite`` when its annotations ask for them (empty when disabled for it).

    :param endpoint_picker: name of the endpoint-picker Service in the workload's namespace;
        default :func:`~llmaz.render.endpoint_picker.endpoint_picker_name` (``<name>-epp``).
    :param endpoint_picker_port: its gRPC port.
    :param fail_open: route requests even when the endpoint picker does not answer.
    :raises InvalidInferenceModel: a bad priority, criticality or target-models annotation.
    """
    if not w.enabled("inference-pool"):
        return []
    labels = w.labels()
    out: list[dict[str, Any]] = [
        {
            "apiVersion": INFERENCE_API_VERSION,
            "kind": "InferencePool",
            "metadata": metadata(w.name, w.namespace, labels),
            "spec": {
                "selector": {"matchLabels": {LWS_NAME_LABEL: w.name, LWS_WORKER_INDEX_LABEL: "0"}},
                "targetPorts": [{"number": w.port}],
                "endpointPickerRef": {
                    "kind": "Service",
                    "name": endpoint_picker or endpoint_picker_name(w.name),
                    "port": {"number": endpoint_picker_port},
                    "failureMode": "FailOpen" if fail_open else "FailClose",
                },
            },
        }
    ]
    priority = _priority(w)
    if priority is not None:
        out.append(
            {
                "apiVersion": INFERENCE_X_API_VERSION,
                "kind": "InferenceObjective",
                "metadata": metadata(w.name, w.namespace, labels),
                "spec": {"priority": priority, "poolRef": pool_backend_ref(w)},
            }
        )
    targets = _target_models(w)
    if targets:
        out.append(
            {
                "apiVersion": INFERENCE_X_API_VERSION,
                "kind": "InferenceModelRewrite",
                "metadata": metadata(w.name, w.namespace, labels),
                "spec": {
                    "poolRef": pool_backend_ref(w),
                    "rules": [{"matches": [{"model": {"value": w.model_name}}], "targets": targets}],
                },
            }
        )
    return out
