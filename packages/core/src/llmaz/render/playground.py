"""Playground -> inference Service (+ autoscaler objects)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from llmaz.api import BackendRuntime, Flavor, Playground, RecommendedConfig
from llmaz.api.quantity import to_str
from llmaz.plugins.autoscaler import Autoscaler, AutoscalingInput, AutoscalingOutput, AutoscalingProblem
from llmaz.plugins.backend import Backend, MultiHostRecipe
from llmaz.render import flavors as flavor_mod
from llmaz.render import templating
from llmaz.render.common import (
    ANNOTATION_FLAVORS,
    ANNOTATION_SELECTED_FLAVOR,
    ANNOTATION_SKIP_MODEL_LOADER,
    DEFAULT_GRACE_PERIOD_SECONDS,
    DEFAULT_PORT,
    LABEL_MODEL_FAMILY_NAME,
    LABEL_MODEL_NAME,
    MANAGED_BY,
    MANAGER,
    MODEL_RUNNER,
    Rendered,
    env_dict,
    merge_envs,
    merge_resources,
    metadata,
)
from llmaz.render.errors import (
    BackendRuntimeNotFound,
    ConfigNotFound,
    InvalidFlavor,
    InvalidManifest,
    MultiHostUnsupported,
)
from llmaz.render.models import Claimed, Models, resolve_claims

DEFAULT_CONFIG = "default"
SPECULATIVE_CONFIG = "speculative-decoding"
NODES_PARAM = "NODES"
"""Flavor param: pods (nodes) per replica. Without it, ``PP`` > 1 also means that many nodes."""
DRAIN_MARGIN_SECONDS = 30
"""terminationGracePeriodSeconds = the backend's preStop drain timeout + this margin (shutdown)."""


def infer_config_name(playground: Playground, claimed: Claimed) -> str:
    """Explicit ``configName``, else ``speculative-decoding`` when a draft model is claimed, else
    ``default``."""
    brc = playground.spec.backend_runtime_config
    if brc is not None and brc.config_name:
        return brc.config_name
    if playground.spec.model_claims is not None and claimed.has_draft:
        return SPECULATIVE_CONFIG
    return DEFAULT_CONFIG


def _find_config(br: BackendRuntime, name: str, explicit: bool) -> RecommendedConfig | None:
    configs = br.spec.recommended_configs or []
    for cfg in configs:
        if cfg.name == name:
            return cfg
    if explicit or configs:
        known = ", ".join(c.name for c in configs) or "none"
        raise ConfigNotFound(
            "spec.backendRuntimeConfig.configName",
            f"BackendRuntime {br.name!r} has no recommended config {name!r} (it has: {known})",
        )
    return None


def _param(flavor: Flavor | None, *names: str) -> str | None:
    if flavor is None or not flavor.params:
        return None
    for n in names:
        if flavor.params.get(n):
            return flavor.params[n]
    return None


def _int_param(flavor: Flavor | None, name: str, field: str) -> int | None:
    raw = _param(flavor, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidFlavor(
            field, f"param {name}={raw!r} of flavor {flavor.name if flavor else ''!r} is not an integer"
        ) from None
    if value < 1:
        raise InvalidFlavor(
            field, f"param {name}={raw!r} of flavor {flavor.name if flavor else ''!r} must be >= 1"
        )
    return value


def group_size(flavor: Flavor | None, recipe: MultiHostRecipe | None, field: str) -> int:
    """Pods per replica the selected flavor asks for (1 = single host)."""
    nodes = _int_param(flavor, NODES_PARAM, field)
    if nodes is not None:
        return nodes
    if recipe is not None and recipe.group_size_param:
        size = _int_param(flavor, recipe.group_size_param, field)
        if size is not None:
            return size
    return _int_param(flavor, "PP", field) or 1


def template_variables(
    claimed: Claimed, flavor: Flavor | None, skip_loader: bool
) -> tuple[dict[str, str | None], dict[str, str]]:
    main = claimed.main
    variables: dict[str, str | None] = {
        templating.MODEL_PATH: main.model_path(skip_loader),
        templating.MODEL_NAME: main.model_name(),
        templating.DRAFT_MODEL_PATH: (
            claimed.sources[1].model_path(skip_loader) if claimed.has_draft else None
        ),
        templating.TP: _param(flavor, "TP"),
        templating.PP: _param(flavor, "PP"),
        templating.INSTANCE_TYPE: _param(flavor, "INSTANCE-TYPE", "INSTANCE_TYPE"),
    }

    def why(param: str) -> str:
        if flavor is None:
            return f"no flavor is claimed, so there is no param {param}"
        return f"the selected flavor {flavor.name!r} has no param {param}"

    hints = {
        templating.DRAFT_MODEL_PATH: "no model with role draft is claimed",
        templating.TP: why("TP"),
        templating.PP: why("PP"),
        templating.INSTANCE_TYPE: why("INSTANCE-TYPE"),
    }
    return variables, hints


def _port(br: BackendRuntime, backend: Backend | None) -> int:
    if backend is not None:
        return int(backend.port)
    probe = br.spec.readiness_probe or br.spec.startup_probe or {}
    port = (probe.get("httpGet") or {}).get("port")
    return port if isinstance(port, int) else DEFAULT_PORT


def _grace_period(backend: Backend | None) -> int:
    if backend is None or backend.lifecycle() is None:
        return DEFAULT_GRACE_PERIOD_SECONDS
    return max(DEFAULT_GRACE_PERIOD_SECONDS, int(backend.drain_timeout_seconds) + DRAIN_MARGIN_SECONDS)


def _pod_template(
    *,
    container: dict[str, Any],
    shm: str | None,
    grace: int,
    labels: dict[str, str],
    annotations: dict[str, str],
) -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": grace, "containers": [container]}
    if shm is not None:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}]
    template: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    if meta:
        template["metadata"] = meta
    template["spec"] = spec
    return template


def _with_hints(flavors: list[Flavor], outputs: Iterable[AutoscalingOutput]) -> dict[str, Any] | None:
    affinity = flavor_mod.node_affinity(flavors)
    extra_per_flavor: dict[str, list[dict[str, Any]]] = {}
    extra_preferred: list[dict[str, Any]] = []
    for out in outputs:
        for name, reqs in sorted(out.node_affinity_hints.per_flavor.items()):
            extra_per_flavor.setdefault(name, []).extend(reqs)
        extra_preferred.extend(out.node_affinity_hints.preferred)
    if not extra_per_flavor and not extra_preferred:
        return affinity
    affinity = dict(affinity or {})
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    if req_key in affinity:
        terms = []
        with_selector = [f for f in flavors if f.node_selector]
        for f in with_selector:
            base = flavor_mod.node_affinity([f]) or {}
            exprs = list(base[req_key]["nodeSelectorTerms"][0]["matchExpressions"])
            exprs += [e for e in extra_per_flavor.get(f.name, []) if e not in exprs]
            term = {"matchExpressions": exprs}
            if term not in terms:
                terms.append(term)
        affinity[req_key] = {"nodeSelectorTerms": terms}
    if extra_preferred:
        pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
        affinity[pref_key] = list(affinity.get(pref_key) or []) + extra_preferred
    return affinity


def render_playground(
    playground: Playground,
    models: Models,
    backend_runtime: BackendRuntime | None,
    *,
    backend: Backend | None = None,
    autoscalers: Iterable[Autoscaler] = (),
    flavor: str | None = None,
) -> Rendered:
    """The inference Service a Playground leads to, plus its autoscaler objects.

    :param models: the OpenModels that may be claimed (by name, or a list).
    :param backend_runtime: the BackendRuntime named by ``backendRuntimeConfig.backendName``, or
        ``None`` when it does not exist (raises :class:`BackendRuntimeNotFound`).
    :param backend: the backend plugin of that runtime, when installed: its port, graceful drain
        timeout and multi-host recipe are used.
    :param autoscalers: autoscaler plugins; each is asked for objects and pod additions.
    :param flavor: name of the claimed flavor whose params (``TP``, ``PP``, ``INSTANCE-TYPE``,
        ``NODES``) and accelerator counts apply; default the first claimed. The operator passes the
        next one to fall back.
    :raises RenderError: a typed subclass naming the field at fault.
    """
    spec = playground.spec
    name, namespace = playground.name, playground.metadata.namespace
    annotations = playground.metadata.annotations or {}
    skip_loader = annotations.get(ANNOTATION_SKIP_MODEL_LOADER) == "true"
    claimed = resolve_claims(spec.model_claim, spec.model_claims, models)
    brc = spec.backend_runtime_config
    backend_name = brc.backend_name if brc is not None else "vllm"
    if backend_runtime is None:
        raise BackendRuntimeNotFound(
            "spec.backendRuntimeConfig.backendName", f"BackendRuntime {backend_name!r} not found"
        )
    flavors = list(claimed.flavors)
    selected = flavor_mod.select_flavor(flavors, flavor, field=claimed.flavors_field)
    recipe = backend.multi_host_recipe() if backend is not None else None
    size = group_size(selected, recipe, claimed.flavors_field)
    config_name = infer_config_name(playground, claimed)
    explicit_config = brc is not None and bool(brc.config_name)
    if size > 1 and recipe is not None and not explicit_config:
        # resources and shared memory of a multi-host group come from the recipe's config
        names = {c.name for c in backend_runtime.spec.recommended_configs or []}
        if recipe.config_name in names:
            config_name = recipe.config_name
    config = _find_config(backend_runtime, config_name, explicit_config)

    variables, hints = template_variables(claimed, selected, skip_loader)

    br_spec = backend_runtime.spec
    version = (brc.version if brc is not None and brc.version else None) or br_spec.version
    image = f"{br_spec.image}:{version}"
    envs = merge_envs(
        [env_dict(e) for e in br_spec.envs or []], [env_dict(e) for e in (brc.envs if brc else None) or []]
    )
    resources = merge_resources(config.resources if config else None, brc.resources if brc else None)
    shm_value = (brc.shared_memory_size if brc is not None else None) or (
        config.shared_memory_size if config else None
    )
    shm = to_str(shm_value) if shm_value is not None else None
    extra_args = list((brc.args if brc else None) or [])
    port = _port(backend_runtime, backend)
    grace = _grace_period(backend)
    args_field = "spec.backendRuntimeConfig.configName"

    # Autoscalers first: their pod labels/annotations/affinity hints go into the templates.
    outputs: list[tuple[Autoscaler, AutoscalingOutput]] = []
    problems: list[AutoscalingProblem] = []
    prune: list[tuple[str, str]] = []
    inp = AutoscalingInput(
        playground=playground,
        models=[s.model for s in claimed.sources],
        backend_runtime=backend_runtime,
        config_name=config_name,
        flavors=flavors,
        engine_metrics=backend.key_metrics if backend is not None else None,
    )
    for scaler in sorted(autoscalers, key=lambda a: a.name):
        out = scaler.render(inp)
        outputs.append((scaler, out))
        problems.extend(out.problems)
        for kind in scaler.managed_kinds:
            if kind not in prune:
                prune.append(kind)
    pod_labels: dict[str, str] = {}
    pod_annotations: dict[str, str] = {}
    for _, out in outputs:
        pod_labels.update(out.pod_labels)
        pod_annotations.update(out.pod_annotations)
    main = claimed.main
    pod_labels[LABEL_MODEL_NAME] = main.name
    pod_labels[LABEL_MODEL_FAMILY_NAME] = main.model.spec.family_name
    if flavors:
        pod_annotations[ANNOTATION_FLAVORS] = ",".join(f.name for f in flavors)

    def runner(command: list[str] | None, args: list[str], *, serves_http: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"name": MODEL_RUNNER, "image": image}
        if command:
            c["command"] = list(command)
        if args:
            c["args"] = args
        if envs:
            c["env"] = copy.deepcopy(envs)
        if resources:
            c["resources"] = {k: dict(v) for k, v in resources.items()}
        if serves_http:
            c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
            if br_spec.lifecycle:
                c["lifecycle"] = copy.deepcopy(br_spec.lifecycle)
            for key, probe in (
                ("startupProbe", br_spec.startup_probe),
                ("livenessProbe", br_spec.liveness_probe),
                ("readinessProbe", br_spec.readiness_probe),
            ):
                if probe:
                    c[key] = copy.deepcopy(probe)
        return c

    compatible = flavor_mod.compatible(flavors, selected)
    affinity = _with_hints(compatible, (o for _, o in outputs))

    def template(container: dict[str, Any]) -> dict[str, Any]:
        t = _pod_template(
            container=container, shm=shm, grace=grace, labels=pod_labels, annotations=pod_annotations
        )
        if affinity:
            t["spec"]["affinity"] = {"nodeAffinity": copy.deepcopy(affinity)}
        return t

    workload: dict[str, Any] = {}
    if size > 1:
        if recipe is None:
            raise MultiHostUnsupported(
                "spec.backendRuntimeConfig.backendName",
                f"flavor {selected.name if selected else ''!r} asks for {size} nodes per replica but backend "
                f"{backend_name!r} has no multi-host recipe"
                + ("" if backend is not None else " (no backend plugin of that name is installed)"),
            )
        leader_args = templating.render_args(
            recipe.leader_args, variables, config=recipe.config_name, field=args_field, hints=hints
        )
        worker_args = templating.render_args(
            recipe.worker_args, variables, config=recipe.config_name, field=args_field, hints=hints
        )
        workload["size"] = size
        workload["restartPolicy"] = "RecreateGroupOnPodRestart"
        workload["leaderTemplate"] = template(
            runner(recipe.leader_command, leader_args + extra_args, serves_http=True)
        )
        workload["workerTemplate"] = template(
            runner(recipe.worker_command, worker_args + extra_args, serves_http=recipe.worker_serves_http)
        )
    else:
        args = (
            templating.render_args(
                config.args or [], variables, config=config.name, field=args_field, hints=hints
            )
            if config is not None
            else []
        )
        workload["workerTemplate"] = template(runner(br_spec.command, args + extra_args, serves_http=True))

    labels = {MANAGED_BY: MANAGER, LABEL_MODEL_NAME: main.name}
    meta = metadata(name, namespace, labels)
    svc_annotations: dict[str, str] = {}
    if skip_loader:
        svc_annotations[ANNOTATION_SKIP_MODEL_LOADER] = "true"
    if flavor is not None and selected is not None:
        svc_annotations[ANNOTATION_SELECTED_FLAVOR] = selected.name
    if svc_annotations:
        meta["annotations"] = svc_annotations
    claims: dict[str, Any] = {"models": [{"name": r.name, "role": str(r.role)} for r in claimed.refs]}
    if claimed.explicit_flavors:
        claims["inferenceFlavors"] = [f.name for f in flavors]
    service = {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "modelClaims": claims,
            "replicas": spec.replicas,
            "workloadTemplate": workload,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
        },
    }
    objects: list[dict[str, Any]] = [service]
    for scaler, out in outputs:
        for i, obj in enumerate(out.objects):
            obj_ns = (obj.get("metadata") or {}).get("namespace")
            if obj_ns not in (None, namespace):
                raise InvalidManifest(
                    "metadata.namespace",
                    f"autoscaler {scaler.name!r} rendered object #{i} in namespace {obj_ns!r}, "
                    f"not the Playground's {namespace!r}",
                )
            child = copy.deepcopy(obj)
            child_meta = dict(child.get("metadata") or {})
            if namespace:
                child_meta["namespace"] = namespace
            child_meta["labels"] = {**(child_meta.get("labels") or {}), MANAGED_BY: MANAGER}
            child["metadata"] = child_meta
            objects.append(child)
    return Rendered(
        objects=tuple(objects),
        prune_kinds=tuple(prune),
        config_name=config_name,
        flavor=selected.name if selected else None,
        problems=tuple(problems),
    )
