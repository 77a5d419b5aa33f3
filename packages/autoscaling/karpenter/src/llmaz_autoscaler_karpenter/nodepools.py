"""Karpenter ``NodePool`` manifests (``karpenter.sh/v1``) for a model's flavors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmaz.api import Flavor, OpenModel
from llmaz.api.conventions import LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz_autoscaler_karpenter.hints import (
    CAPACITY_TYPE_LABEL,
    capacity_types,
    is_well_known,
    param_requirements,
    selector_requirements,
)

NODEPOOL_API_VERSION = "karpenter.sh/v1"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class NodeClassRef:
    """The cloud-specific node class every NodePool points at (AWS ``EC2NodeClass`` by default)."""

    name: str = "default"
    kind: str = "EC2NodeClass"
    group: str = "karpenter.k8s.aws"


def _dns_name(*parts: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return name[:63].rstrip("-")


def nodepool_for_flavor(
    model: OpenModel,
    flavor: Flavor,
    *,
    priority: int,
    node_class: NodeClassRef,
    default_capacity_types: tuple[str, ...] = ("on-demand",),
    gpu_taint: bool = False,
) -> dict[str, Any]:
    """One NodePool for one flavor. ``priority`` 0 is the model's first flavor (highest weight)."""
    requirements = param_requirements(flavor)
    if not capacity_types(flavor) and default_capacity_types:
        requirements.append(
            {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": list(default_capacity_types)}
        )
    template_labels: dict[str, str] = {}
    for req in selector_requirements(flavor):
        if is_well_known(req["key"]):
            requirements.append(req)
        else:
            template_labels[req["key"]] = req["values"][0]
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": node_class.group, "kind": node_class.kind, "name": node_class.name},
        "requirements": requirements,
    }
    if gpu_taint and GPU_RESOURCE in (flavor.limits or {}):
        template_spec["taints"] = [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]
    template: dict[str, Any] = {"spec": template_spec}
    if template_labels:
        template["metadata"] = {"labels": template_labels}
    return {
        "apiVersion": NODEPOOL_API_VERSION,
        "kind": "NodePool",
        "metadata": {
            "name": _dns_name("llmaz", model.name, flavor.name),
            "labels": {
                MANAGED_BY: MANAGER,
                LABEL_MODEL_NAME: model.name,
                "llmaz.io/flavor": flavor.name,
            },
        },
        "spec": {
            "weight": max(1, 100 - 10 * priority),
            "template": template,
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
        },
    }


def nodepools_for_model(
    model: OpenModel,
    *,
    node_class: NodeClassRef | None = None,
    default_capacity_types: tuple[str, ...] = ("on-demand",),
    gpu_taint: bool = False,
) -> list[dict[str, Any]]:
    """NodePools for every flavor of ``model``, weighted by flavor priority (first flavor highest)."""
    flavors = (model.spec.inference_config.flavors if model.spec.inference_config else None) or []
    return [
        nodepool_for_flavor(
            model,
            flavor,
            priority=i,
            node_class=node_class or NodeClassRef(),
            default_capacity_types=default_capacity_types,
            gpu_taint=gpu_taint,
        )
        for i, flavor in enumerate(flavors)
    ]
