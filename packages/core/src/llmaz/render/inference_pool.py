"""Gateway API Inference Extension objects (``inference.networking.x-k8s.io/v1alpha2``).

Per workload an ``InferencePool`` selecting its serving pods (the leader of each LeaderWorkerSet
group, like ``<name>-lb``) and an ``InferenceModel`` naming the model clients ask for, with its
criticality and optional target-model weights taken from annotations.
"""

from __future__ import annotations

from typing import Any

from llmaz.render.errors import RenderError
from llmaz.render.objects import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, metadata
from llmaz.render.workload import Workload

__all__ = [
    "ANNOTATION_CRITICALITY",
    "ANNOTATION_TARGET_MODELS",
    "CRITICALITIES",
    "DEFAULT_ENDPOINT_PICKER_PORT",
    "INFERENCE_API_VERSION",
    "InvalidInferenceModel",
    "render_inference_pool",
]

INFERENCE_API_VERSION = "inference.networking.x-k8s.io/v1alpha2"
ANNOTATION_CRITICALITY = "llmaz.io/criticality"
"""``Critical``, ``Standard`` or ``Sheddable``: the InferenceModel's criticality (default unset)."""
ANNOTATION_TARGET_MODELS = "llmaz.io/target-models"
"""``name=weight,name=weight``: the InferenceModel's target models (traffic split by weight)."""
CRITICALITIES: tuple[str, ...] = ("Critical", "Standard", "Sheddable")
MAX_WEIGHT = 1_000_000
DEFAULT_ENDPOINT_PICKER_PORT = 9002
"""gRPC port of the endpoint picker (ext-proc) Service, as the Inference Extension deploys it."""


class InvalidInferenceModel(RenderError):
    """An InferenceModel annotation has a value the Inference Extension would refuse."""

    condition_reason = "InvalidAnnotation"


def _criticality(w: Workload) -> str | None:
    value = w.annotations.get(ANNOTATION_CRITICALITY)
    if value is None:
        return None
    if value not in CRITICALITIES:
        raise InvalidInferenceModel(
            f"metadata.annotations[{ANNOTATION_CRITICALITY}]",
            f"criticality {value!r} is not one of {', '.join(CRITICALITIES)}",
            kind=w.kind,
            name=w.name,
        )
    return value


def _target_models(w: Workload) -> list[dict[str, Any]]:
    raw = w.annotations.get(ANNOTATION_TARGET_MODELS, "")
    field = f"metadata.annotations[{ANNOTATION_TARGET_MODELS}]"
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        name, sep, weight = part.partition("=")
        name = name.strip()
        if not sep or not name or not weight.strip().isdigit():
            raise InvalidInferenceModel(
                field, f"{part!r} is not name=weight (weight a whole number)", kind=w.kind, name=w.name
            )
        value = int(weight)
        if not 1 <= value <= MAX_WEIGHT:
            raise InvalidInferenceModel(
                field, f"weight of {name!r} is {value}; it must be 1..{MAX_WEIGHT}", kind=w.kind, name=w.name
            )
        if name in seen:
            raise InvalidInferenceModel(
                field, f"target model {name!r} is listed twice", kind=w.kind, name=w.name
            )
        seen.add(name)
        out.append({"name": name, "weight": value})
    return out


def render_inference_pool(
    w: Workload,
    *,
    endpoint_picker: str | None = None,
    endpoint_picker_port: int = DEFAULT_ENDPOINT_PICKER_PORT,
    fail_open: bool = False,
) -> list[dict[str, Any]]:
    """The ``InferencePool`` and ``InferenceModel`` of one workload (empty when disabled for it).

    :param endpoint_picker: name of the endpoint-picker Service in the workload's namespace;
        default ``<name>-epp``.
    :param endpoint_picker_port: its gRPC port.
    :param fail_open: route requests even when the endpoint picker does not answer.
    :raises InvalidInferenceModel: a bad criticality or target-models annotation.
    """
    if not w.enabled("inference-pool"):
        return []
    labels = w.labels()
    pool = {
        "apiVersion": INFERENCE_API_VERSION,
        "kind": "InferencePool",
        "metadata": metadata(w.name, w.namespace, labels),
        "spec": {
            "selector": {LWS_NAME_LABEL: w.name, LWS_WORKER_INDEX_LABEL: "0"},
            "targetPortNumber": w.port,
            "extensionRef": {
                "name": endpoint_picker or f"{w.name}-epp",
                "portNumber": endpoint_picker_port,
                "failureMode": "FailOpen" if fail_open else "FailClose",
            },
        },
    }
    spec: dict[str, Any] = {"modelName": w.model_name}
    criticality = _criticality(w)
    if criticality is not None:
        spec["criticality"] = criticality
    targets = _target_models(w)
    if targets:
        spec["targetModels"] = targets
    spec["poolRef"] = {"name": w.name}
    model = {
        "apiVersion": INFERENCE_API_VERSION,
        "kind": "InferenceModel",
        "metadata": metadata(w.name, w.namespace, labels),
        "spec": spec,
    }
    return [pool, model]
