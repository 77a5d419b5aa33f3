"""Scheduling hints for stock Karpenter, derived from a model's flavors."""

from __future__ import annotations

from typing import Any

from llmaz.api import Flavor

INSTANCE_TYPE_PARAM = "INSTANCE-TYPE"
CAPACITY_TYPE_PARAM = "CAPACITY-TYPE"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CAPACITY_TYPES = ("spot", "on-demand", "reserved")

WELL_KNOWN_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws", "karpenter.azure.com")
"""Label domains Karpenter reserves: keys there go into NodePool requirements, never template labels."""


def split_values(value: str) -> list[str]:
    """``"g5.xlarge, g5.2xlarge"`` -> ``["g5.xlarge", "g5.2xlarge"]`` (order kept, duplicates dropped)."""
    out: list[str] = []
    for part in value.split(","):
        item = part.strip()
        if item and item not in out:
            out.append(item)
    return out


def is_well_known(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in WELL_KNOWN_DOMAINS)


def capacity_types(flavor: Flavor) -> list[str]:
    """Capacity types a flavor allows, most preferred first; ``[]`` when it does not say.

    :raises ValueError: for a value Karpenter does not know.
    """
    raw = (flavor.params or {}).get(CAPACITY_TYPE_PARAM)
    if not raw:
        return []
    values = split_values(raw)
    unknown = [v for v in values if v not in CAPACITY_TYPES]
    if unknown:
        raise ValueError(
            f"flavor {flavor.name!r}: {CAPACITY_TYPE_PARAM} {raw!r} has unknown value(s) {unknown}; "
            f"use {', '.join(CAPACITY_TYPES)}"
        )
    return values


def param_requirements(flavor: Flavor) -> list[dict[str, Any]]:
    """NodeSelectorRequirements from a flavor's params (instance type and capacity type)."""
    params = flavor.params or {}
    reqs: list[dict[str, Any]] = []
    instance_types = split_values(params.get(INSTANCE_TYPE_PARAM, ""))
    if instance_types:
        reqs.append({"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": instance_types})
    capacity = capacity_types(flavor)
    if capacity:
        reqs.append({"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": capacity})
    return reqs


def selector_requirements(flavor: Flavor) -> list[dict[str, Any]]:
    """NodeSelectorRequirements from a flavor's nodeSelector (sorted by key for stable output)."""
    return [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted((flavor.node_selector or {}).items())
    ]
