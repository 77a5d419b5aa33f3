"""Building blocks of rendered Kubernetes objects: the result type, metadata, env and resource merging."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmaz.api import EnvVar, ResourceRequirements, Service, quantity
from llmaz.api.conventions import MODEL_RUNNER
from llmaz.plugins.autoscaler import AutoscalingProblem
from llmaz.render.errors import InvalidResources

DEFAULT_PORT = 8080

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def leader_selector(lws_name: str) -> str:
    """The label selector of a LeaderWorkerSet's leader pods, exactly as the LWS controller writes it
    to ``status.hpaPodSelector`` (keys sorted). The operator reports it in ``status.selector`` (the
    scale subresource) from its first status write instead of writing the status again once the LWS
    controller got to it (issue 15)."""
    return f"{LWS_NAME_LABEL}={lws_name},{LWS_WORKER_INDEX_LABEL}=0"


@dataclass(frozen=True)
class Rendered:
    """The desired children of one object.

    :param objects: manifests to apply, in a stable order. They carry no ``ownerReferences``: the
        operator adds the owner reference (it knows the owner's uid) when it applies them.
    :param prune_kinds: ``(apiVersion, kind)`` pairs the render manages; objects of these kinds owned
        by the owner that are not in ``objects`` are stale and must be deleted (an HPA after
        ``elasticConfig`` was removed, for instance).
    :param service: a Playground's inference Service as the typed model; ``objects[0]`` is its
        manifest. Following the Playground down to its LeaderWorkerSet uses this, never the dict.
    :param config_name: the recommended config used (Playgrounds).
    :param flavor: the flavor whose accelerator counts and params were applied, if any.
    :param problems: things an autoscaler could not render, for status.
    """

    objects: tuple[dict[str, Any], ...]
    service: Service | None = None
    prune_kinds: tuple[tuple[str, str], ...] = ()
    config_name: str | None = None
    flavor: str | None = None
    problems: tuple[AutoscalingProblem, ...] = field(default_factory=tuple)


def metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def env_dict(env: EnvVar) -> dict[str, Any]:
    return env.model_dump(mode="json", by_alias=True, exclude_none=True)


def merge_envs(*layers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge env lists by name: a later layer replaces an earlier value in place; new names are
    appended in their order. The result never holds a name twice and its order is stable."""
    out: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for layer in layers:
        for env in layer:
            name = env["name"]
            if name in index:
                out[index[name]] = copy.deepcopy(env)
            else:
                index[name] = len(out)
                out.append(copy.deepcopy(env))
    return out


def add_missing_envs(container: dict[str, Any], envs: Sequence[dict[str, Any]]) -> None:
    """Append ``envs`` whose names the container does not define yet."""
    current = container.setdefault("env", [])
    names = {e["name"] for e in current}
    for env in envs:
        if env["name"] not in names:
            names.add(env["name"])
            current.append(copy.deepcopy(env))


def _resource_list(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: quantity.to_str(v) for k, v in (values or {}).items()}


def merge_resources(
    recommended: ResourceRequirements | None,
    override: ResourceRequirements | None,
    *,
    field_path: str = "spec.backendRuntimeConfig.resources",
) -> dict[str, dict[str, str]]:
    """llmaz's rule: per key, the Playground wins over the recommended config, separately for limits
    and requests; then a cpu/memory limit lower than its request is raised to the request.

    Any other resource whose merged limit is below its request raises :class:`InvalidResources`
    (the CRD's CEL rule can only check a fixed set of keys within the API server's cost budget, and
    Kubernetes would otherwise reject every pod of the workload).
    """
    limits = _resource_list(recommended.limits if recommended else None)
    requests = _resource_list(recommended.requests if recommended else None)
    if override is not None:
        limits.update(_resource_list(override.limits))
        requests.update(_resource_list(override.requests))
    for key in ("cpu", "memory"):
        if key in requests and key in limits:
            req, lim = quantity.parse(requests[key]), quantity.parse(limits[key])
            if req is not None and lim is not None and req > lim:
                limits[key] = requests[key]
    for key in sorted(set(requests) & set(limits)):
        req, lim = quantity.parse(requests[key]), quantity.parse(limits[key])
        if req is not None and lim is not None and lim < req:
            raise InvalidResources(
                field_path,
                f"the limit of {key} ({limits[key]}) is below its request ({requests[key]}) once the "
                "recommended config and the Playground are merged; raise the limit or lower the request",
            )
    out: dict[str, dict[str, str]] = {}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    if requests:
        out["requests"] = dict(sorted(requests.items()))
    return out


def set_accelerators(container: dict[str, Any], limits: Mapping[str, Any] | None) -> None:
    """Every key of a flavor's limits sets both the request and the limit (the last word)."""
    if not limits:
        return
    resources = container.setdefault("resources", {})
    for part in ("requests", "limits"):
        current = dict(resources.get(part) or {})
        for key, value in sorted(limits.items()):
            current[key] = quantity.to_str(value)
        resources[part] = current


def find_container(pod_spec: Mapping[str, Any], name: str = MODEL_RUNNER) -> dict[str, Any] | None:
    for container in pod_spec.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == name:
            return container
    return None
