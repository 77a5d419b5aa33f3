"""inference Service -> LeaderWorkerSet + ``<name>-lb`` Service."""

from __future__ import annotations

import copy
from typing import Any

from llmaz import __version__
from llmaz.api import Service
from llmaz.api.conventions import (
    ANNOTATION_FLAVORS,
    ANNOTATION_SELECTED_FLAVOR,
    ANNOTATION_SKIP_MODEL_LOADER,
    LABEL_MODEL_FAMILY_NAME,
    LABEL_MODEL_NAME,
    MANAGED_BY,
    MANAGER,
    MODEL_RUNNER,
)
from llmaz.loader.layout import LOADER_COMMAND, default_loader_image
from llmaz.plugins.backend import Backend
from llmaz.render import flavors as flavor_mod
from llmaz.render.cache import CACHE_VOLUME, SharedCache
from llmaz.render.errors import InvalidModelClaims, InvalidWorkloadTemplate
from llmaz.render.models import Claimed, Models, resolve_claims
from llmaz.render.objects import (
    DEFAULT_PORT,
    LWS_API_VERSION,
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    Rendered,
    add_missing_envs,
    find_container,
    merge_envs,
    metadata,
    set_accelerators,
)
from llmaz.render.sources import MODEL_DIR, ResolvedSource

DEFAULT_MODEL_LOADER_IMAGE = default_loader_image(__version__)
"""Loader image used when the operator passes none: this project's own image (``llmaz load-model``)."""


def _volumes_and_mounts(
    source: ResolvedSource, skip_loader: bool, cache: SharedCache | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The pod volume of one model and its mount in the runner (or ``None, None``)."""
    vol = source.volume_name
    if source.protocol == "host":
        path = source.path or "/"
        return (
            {"name": vol, "hostPath": {"path": path}},
            {"name": vol, "mountPath": path, "readOnly": True},
        )
    if source.protocol == "pvc":
        return (
            {"name": vol, "persistentVolumeClaim": {"claimName": source.claim, "readOnly": True}},
            {"name": vol, "mountPath": f"{MODEL_DIR}/{vol}", "readOnly": True},
        )
    if source.needs_loader(skip_loader) and cache is not None:
        # The model's folder in the cache, mounted where it would be without a cache.
        return (
            cache.volume(),
            {
                "name": CACHE_VOLUME,
                "mountPath": source.local_path(),
                "subPath": source.cached_path()[len(MODEL_DIR) + 1 :],
                "readOnly": True,
            },
        )
    if source.needs_loader(skip_loader):
        local = source.local_path()
        return (
            {"name": vol, "emptyDir": {}},
            {
                "name": vol,
                "mountPath": local,
                "subPath": local[len(MODEL_DIR) + 1 :],
                "readOnly": True,
            },
        )
    return None, None


def loader_container(
    source: ResolvedSource, image: str, runner: dict[str, Any] | None, cache: SharedCache | None
) -> dict[str, Any]:
    envs = merge_envs(source.loader_inputs(shared_cache=cache is not None), source.credential_envs())
    container: dict[str, Any] = {
        "name": source.loader_name,
        "image": image,
        "command": list(LOADER_COMMAND),
        "env": envs,
    }
    if runner is not None:
        # Proxies, mirrors (HF_ENDPOINT) and the like set on the runner reach the loader too,
        # but never twice under one name.
        add_missing_envs(container, runner.get("env") or [])
    volume = CACHE_VOLUME if cache is not None else source.volume_name
    container["volumeMounts"] = [{"name": volume, "mountPath": f"{MODEL_DIR}/"}]
    return container


def _check_loaded_apart(claimed: Claimed, skip_loader: bool) -> None:
    """Two claimed models a loader fetches must land in different folders: the folder is named
    after a hub model's id or file name, or an object-store path's last segment, so
    ``s3://b/llama-70b/hf`` and ``s3://b/llama-1b/hf`` would both be ``models--hf``: one loader
    would write over the other's files, and the pod could not even be created (the second
    model's volume is not mounted). One model claimed twice (its own draft) is one folder, as
    before: that is not a clash."""
    loaded: dict[str, ResolvedSource] = {}
    for source in claimed.sources:
        if not source.needs_loader(skip_loader):
            continue
        where = source.local_path()
        first = loaded.setdefault(where, source)
        if first is not source and first.name != source.name:
            raise InvalidModelClaims(
                "spec.modelClaims.models",
                f"models {first.name!r} and {source.name!r} would both be loaded into {where} (a model's "
                "folder is named after its hub id or file name, or its object-store path's last "
                "segment): give one of them a path whose last segment differs",
            )


def _inject(
    template: dict[str, Any],
    *,
    claimed: Claimed,
    skip_loader: bool,
    loader_image: str,
    cache: SharedCache | None,
    scheduler_name: str | None,
    affinity: dict[str, Any] | None,
    accelerators: dict[str, Any] | None,
    field: str,
    required: bool,
) -> dict[str, Any]:
    template = copy.deepcopy(template)
    spec = template.setdefault("spec", {})
    runner = find_container(spec)
    if runner is None and required:
        raise InvalidWorkloadTemplate(f"{field}.spec.containers", f"needs a container named {MODEL_RUNNER!r}")
    meta = template.setdefault("metadata", {})
    main = claimed.main
    meta["labels"] = {
        **(meta.get("labels") or {}),
        LABEL_MODEL_NAME: main.name,
        LABEL_MODEL_FAMILY_NAME: main.model.spec.family_name,
    }
    if claimed.flavors:
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            ANNOTATION_FLAVORS: ",".join(f.name for f in claimed.flavors),
        }
    if scheduler_name and not spec.get("schedulerName"):
        spec["schedulerName"] = scheduler_name
    flavor_mod.merge_node_affinity(spec, affinity)

    _check_loaded_apart(claimed, skip_loader)
    volumes = spec.setdefault("volumes", [])
    volume_names = {v.get("name") for v in volumes}
    init = spec.get("initContainers") or []
    mount_paths = {m.get("mountPath") for m in (runner or {}).get("volumeMounts") or []}
    fetched: set[str] = set()
    for source in claimed.sources:
        if source.name in fetched:
            continue  # one model claimed twice (its own draft): fetched and mounted once
        fetched.add(source.name)
        if source.needs_loader(skip_loader):
            init.append(loader_container(source, loader_image, runner, cache))
        volume, mount = _volumes_and_mounts(source, skip_loader, cache)
        if volume is not None and mount is not None:
            if volume["name"] == CACHE_VOLUME and volume in volumes:
                volume = None  # the cache is one volume for every claimed model
            elif volume["name"] in volume_names:
                raise InvalidWorkloadTemplate(
                    f"{field}.spec.volumes",
                    f"volume name {volume['name']!r} is reserved for "
                    + (
                        "the shared model cache"
                        if volume["name"] == CACHE_VOLUME
                        else f"the model {source.name!r}"
                    ),
                )
            if runner is not None and mount["mountPath"] in mount_paths:
                continue  # the same host path claimed twice: mounted once
            if volume is not None:
                volume_names.add(volume["name"])
                volumes.append(volume)
            if runner is not None:
                runner.setdefault("volumeMounts", []).append(mount)
                mount_paths.add(mount["mountPath"])
        if skip_loader and runner is not None:
            add_missing_envs(runner, source.credential_envs())
    if init:
        spec["initContainers"] = init
    if not volumes:
        del spec["volumes"]
    if runner is not None:
        set_accelerators(runner, accelerators)
    ordered = {"metadata": template.pop("metadata"), "spec": template.pop("spec")}
    ordered.update(template)
    return ordered


def _service_port(template: dict[str, Any], backend: Backend | None) -> int:
    runner = find_container(template.get("spec") or {})
    ports = (runner or {}).get("ports") or []
    for p in ports:
        if p.get("name") == "http" and isinstance(p.get("containerPort"), int):
            return int(p["containerPort"])
    if ports and isinstance(ports[0].get("containerPort"), int):
        return int(ports[0]["containerPort"])
    if backend is not None:
        return int(backend.port)
    return DEFAULT_PORT


def render_service(
    service: Service,
    models: Models,
    *,
    backend: Backend | None = None,
    flavor: str | None = None,
    model_loader_image: str = DEFAULT_MODEL_LOADER_IMAGE,
    model_cache: SharedCache | None = None,
    scheduler_name: str | None = None,
) -> Rendered:
    """The LeaderWorkerSet and the ``<name>-lb`` Service of an inference Service.

    :param models: the OpenModels that may be claimed.
    :param backend: the backend plugin serving it, if known: its port is the fallback when the
        runner container declares none.
    :param flavor: the claimed flavor whose accelerator counts apply; default the one recorded by
        the Playground render (``llmaz.io/selected-flavor``), else the first claimed.
    :param model_loader_image: image of the model-loader init containers.
    :param model_cache: the shared per-node model cache (operator setting
        ``modelLoader.sharedCache``); ``None``: one ``emptyDir`` per model and pod.
    :param scheduler_name: set on pod templates that name no scheduler (never written back into the
        Service itself).
    """
    spec = service.spec
    name, namespace = service.name, service.metadata.namespace
    annotations = service.metadata.annotations or {}
    skip_loader = annotations.get(ANNOTATION_SKIP_MODEL_LOADER) == "true"
    claimed = resolve_claims(None, spec.model_claims, models)
    flavors = list(claimed.flavors)
    selected = flavor_mod.select_flavor(
        flavors, flavor or annotations.get(ANNOTATION_SELECTED_FLAVOR), field=claimed.flavors_field
    )
    affinity = flavor_mod.node_affinity(flavor_mod.compatible(flavors, selected))
    accelerators = dict(selected.limits) if selected is not None and selected.limits else None
    workload = spec.workload_template

    def inject(template: dict[str, Any], field: str, *, required: bool) -> dict[str, Any]:
        return _inject(
            template,
            claimed=claimed,
            skip_loader=skip_loader,
            loader_image=model_loader_image,
            cache=model_cache,
            scheduler_name=scheduler_name,
            affinity=affinity,
            accelerators=accelerators,
            field=field,
            required=required,
        )

    worker = inject(workload.worker_template, "spec.workloadTemplate.workerTemplate", required=True)
    leader = (
        inject(workload.leader_template, "spec.workloadTemplate.leaderTemplate", required=False)
        if workload.leader_template is not None
        else None
    )
    lwt: dict[str, Any] = {}
    if leader is not None:
        lwt["leaderTemplate"] = leader
    lwt["workerTemplate"] = worker
    lwt["size"] = workload.size
    lwt["restartPolicy"] = str(workload.restart_policy)
    if workload.sub_group_policy is not None:
        subgroup_policy: dict[str, Any] = {
            "subGroupPolicyType": str(workload.sub_group_policy.sub_group_policy_type)
        }
        if workload.sub_group_policy.sub_group_size is not None:
            subgroup_policy["subGroupSize"] = workload.sub_group_policy.sub_group_size
        lwt["subGroupPolicy"] = subgroup_policy
    rollout: dict[str, Any] = {"type": "RollingUpdate"}
    rolling_update = spec.rollout_strategy.rolling_update_configuration if spec.rollout_strategy else None
    rollout["rollingUpdateConfiguration"] = {
        "maxUnavailable": rolling_update.max_unavailable if rolling_update else 1,
        "maxSurge": rolling_update.max_surge if rolling_update else 0,
    }
    if rolling_update is not None and rolling_update.partition is not None:
        rollout["rollingUpdateConfiguration"]["partition"] = rolling_update.partition
    labels = {MANAGED_BY: MANAGER, LABEL_MODEL_NAME: claimed.main.name}
    lws = {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": metadata(name, namespace, labels),
        "spec": {
            "replicas": spec.replicas,
            "startupPolicy": "LeaderReady",
            "rolloutStrategy": rollout,
            "leaderWorkerTemplate": lwt,
        },
    }
    port = _service_port(leader if leader is not None else worker, backend)
    lb = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(f"{name}-lb", namespace, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": {LWS_NAME_LABEL: name, LWS_WORKER_INDEX_LABEL: "0"},
            "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": port}],
        },
    }
    return Rendered(objects=(lws, lb), flavor=selected.name if selected else None)
