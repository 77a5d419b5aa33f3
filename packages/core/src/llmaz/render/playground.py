"""Playground -> inference Service (+ autoscaler objects)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from llmaz.api import (
    BackendRuntime,
    BackendRuntimeConfig,
    BackendRuntimeSpec,
    Flavor,
    LeaderWorkerTemplate,
    ModelClaims,
    ModelRef,
    ObjectMeta,
    Playground,
    RecommendedConfig,
    RestartPolicy,
    Service,
    ServiceSpec,
    conventions,
    quantity,
)
from llmaz.api.conventions import (
    ANNOTATION_FLAVORS,
    ANNOTATION_SELECTED_FLAVOR,
    ANNOTATION_SKIP_MODEL_LOADER,
    DEFAULT_BACKEND,
    DEFAULT_CONFIG,
    DEFAULT_GRACE_PERIOD_SECONDS,
    LABEL_MODEL_FAMILY_NAME,
    LABEL_MODEL_NAME,
    MANAGED_BY,
    MANAGER,
    MODEL_RUNNER,
    SPECULATIVE_CONFIG,
)
from llmaz.api.inference import DEFAULT_ROLLOUT_STRATEGY, MAX_GROUP_SIZE, PodSettings
from llmaz.api.quantity import to_str
from llmaz.plugins.autoscaler import (
    ANNOTATION_AUTOSCALER,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    AutoscalingProblem,
)
from llmaz.plugins.backend import Backend, MultiHostRecipe
from llmaz.plugins.devices import uses_flag
from llmaz.render import flavors as flavor_mod
from llmaz.render import templating
from llmaz.render.errors import (
    BackendRuntimeNotFound,
    ConfigNotFound,
    InvalidFlavor,
    InvalidManifest,
    MultiHostUnsupported,
    known_names,
)
from llmaz.render.models import Claimed, Models, resolve_claims
from llmaz.render.objects import DEFAULT_PORT, Rendered, env_dict, merge_envs, merge_resources

NODES_PARAM = "NODES"
"""Flavor param: pods (nodes) per replica. Without it, ``PP`` > 1 also means that many nodes."""
DRAIN_MARGIN_SECONDS = 30
"""terminationGracePeriodSeconds = the backend's preStop drain timeout + this margin (shutdown)."""


def infer_config_name(playground: Playground, claimed: Claimed) -> str:
    """Explicit ``configName``, else ``speculative-decoding`` when a draft model is claimed, else
    ``default``."""
    runtime_config = playground.spec.backend_runtime_config
    if runtime_config is not None and runtime_config.config_name:
        return runtime_config.config_name
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
    """Pods per replica the selected flavor asks for (1 = single host).

    Why this order: an explicit ``NODES`` param is the user's word; otherwise the backend says which
    parallelism spans nodes (vLLM: pipeline stages, ``PP``), because tensor parallelism stays inside
    one node; without a recipe, ``PP`` > 1 is the best guess llmaz has always used.
    """
    params = [NODES_PARAM]
    if recipe is not None and recipe.group_size_param:
        params.append(recipe.group_size_param)
    params.append("PP")
    for param in params:
        size = _int_param(flavor, param, field)
        if size is None:
            continue
        if size > MAX_GROUP_SIZE:
            raise InvalidFlavor(
                field,
                f"param {param}={size} of flavor {flavor.name if flavor else ''!r} asks for {size} pods per "
                f"replica; a LeaderWorkerSet group holds at most {MAX_GROUP_SIZE}",
            )
        return size
    return 1


def accelerator_count(flavor: Flavor | None) -> int | None:
    """Accelerators the flavor gives one pod: the largest whole count among its ``*gpu`` limits."""
    if flavor is None or not flavor.limits:
        return None
    counts = []
    for key, value in flavor.limits.items():
        if key.split("/")[-1].endswith("gpu"):
            parsed = quantity.parse(value)
            if parsed is not None and parsed == parsed.to_integral_value() and parsed >= 1:
                counts.append(int(parsed))
    return max(counts) if counts else None


def tensor_parallel(flavor: Flavor | None, field: str) -> tuple[int | None, bool]:
    """``(degree, explicit)``: the flavor's ``TP`` param, else its accelerator count."""
    explicit = _int_param(flavor, "TP", field)
    if explicit is not None:
        return explicit, True
    return accelerator_count(flavor), False


def _count_str(count: int | None) -> str | None:
    return str(count) if count is not None else None


def _tensor_parallel_args(
    backend: Backend | None, flavor: Flavor | None, args: list[str], field: str
) -> list[str]:
    """``[flag, TP]`` for a single-host backend with a tensor-parallel flag, unless the args set it."""
    flag = backend.tensor_parallel_flag if backend is not None else None
    if backend is None or not flag or uses_flag(args, flag, *backend.tensor_parallel_aliases):
        return []
    degree, explicit = tensor_parallel(flavor, field)
    if degree is None or (degree == 1 and not explicit):
        return []
    return [flag, str(degree)]


def template_variables(
    claimed: Claimed, flavor: Flavor | None, skip_loader: bool, *, tp_pods: int = 1
) -> tuple[dict[str, str | None], dict[str, str]]:
    """The values of the template variables, and why a missing one is missing. Without a ``TP``
    param, ``{{ .TP }}`` is the accelerators of ``tp_pods`` pods: one pod's, or a multi-host
    group's when the engine's tensor parallelism spans the group (SGLang's ``--tp-size``)."""
    main = claimed.main
    per_pod = accelerator_count(flavor)
    variables: dict[str, str | None] = {
        conventions.MODEL_PATH: main.model_path(skip_loader),
        conventions.MODEL_NAME: main.model_name(),
        conventions.DRAFT_MODEL_PATH: (
            claimed.sources[1].model_path(skip_loader) if claimed.has_draft else None
        ),
        # a flavor without a TP param: one tensor-parallel rank per accelerator of the pod
        conventions.TP: _param(flavor, "TP")
        or _count_str(per_pod * tp_pods if per_pod is not None else None),
        conventions.PP: _param(flavor, "PP"),
        conventions.INSTANCE_TYPE: _param(flavor, "INSTANCE-TYPE", conventions.INSTANCE_TYPE),
    }

    def why(param: str) -> str:
        if flavor is None:
            return f"no flavor is claimed, so there is no param {param}"
        return f"the selected flavor {flavor.name!r} has no param {param}"

    hints = {
        conventions.DRAFT_MODEL_PATH: "no model with role draft is claimed",
        conventions.TP: why("TP"),
        conventions.PP: why("PP"),
        conventions.INSTANCE_TYPE: why("INSTANCE-TYPE"),
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


def _apply_pod_settings(spec: dict[str, Any], settings: PodSettings) -> None:
    """The Playground's ``spec.pod`` on a pod spec (labels and annotations go with llmaz's own,
    which win: :func:`render_playground`). Copies: every template gets its own."""
    if settings.node_selector:
        spec["nodeSelector"] = dict(sorted(settings.node_selector.items()))
    if settings.tolerations:
        spec["tolerations"] = copy.deepcopy(settings.tolerations)
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = copy.deepcopy(settings.image_pull_secrets)
    if settings.topology_spread_constraints:
        spec["topologySpreadConstraints"] = copy.deepcopy(settings.topology_spread_constraints)
    for key, value in (
        ("serviceAccountName", settings.service_account_name),
        ("priorityClassName", settings.priority_class_name),
        ("runtimeClassName", settings.runtime_class_name),
        ("schedulerName", settings.scheduler_name),
    ):
        if value:
            spec[key] = value


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _and_terms(ours: list[dict[str, Any]], users: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Required node selector terms that hold where one of ``ours`` AND one of ``users`` hold.

    The terms of a list are ORed, so (F1 or F2) and (U1 or U2) is the cross product: one term per
    pair with both terms' requirements (matchExpressions and matchFields each concatenated, ours
    first), ours the outer loop, identical terms once. With one side empty, the other side as is.
    A user term without requirements would turn every pair into a copy of our term, i.e. widen
    placement instead of matching no node: the CRD refuses it
    (:data:`llmaz.api.inference.NODE_SELECTOR_TERMS_NOT_EMPTY`).
    """
    if not ours or not users:
        return copy.deepcopy(ours or users)
    terms: list[dict[str, Any]] = []
    for mine in ours:
        for theirs in users:
            term: dict[str, Any] = {}
            for key in ("matchExpressions", "matchFields"):
                requirements = [*(mine.get(key) or []), *(theirs.get(key) or [])]
                if requirements:
                    term[key] = copy.deepcopy(requirements)
            if term not in terms:
                terms.append(term)
    return terms


def _pod_affinity(ours: dict[str, Any] | None, settings: PodSettings | None) -> dict[str, Any] | None:
    """A pod template's ``affinity``: the node affinity llmaz computes (``ours``: the flavors' with
    the autoscalers' hints) combined with the Playground's ``spec.pod.affinity``.

    Required node terms: :func:`_and_terms`. Preferred node terms: ours first, then the user's (all
    kept: their weights add up). podAffinity and podAntiAffinity: the user's, as given. A new copy on
    every call, so no two templates share a list and the inputs stay unchanged.
    """
    user = (settings.affinity if settings is not None else None) or {}
    user_node = user.get("nodeAffinity") or {}
    ours = ours or {}
    node: dict[str, Any] = {}
    terms = _and_terms(
        (ours.get(_REQUIRED) or {}).get("nodeSelectorTerms") or [],
        (user_node.get(_REQUIRED) or {}).get("nodeSelectorTerms") or [],
    )
    if terms:
        node[_REQUIRED] = {"nodeSelectorTerms": terms}
    preferred = [*(ours.get(_PREFERRED) or []), *(user_node.get(_PREFERRED) or [])]
    if preferred:
        node[_PREFERRED] = copy.deepcopy(preferred)
    affinity: dict[str, Any] = {}
    if node:
        affinity["nodeAffinity"] = node
    for key in ("podAffinity", "podAntiAffinity"):
        if user.get(key):
            affinity[key] = copy.deepcopy(user[key])
    return affinity or None


def _with_hints(flavors: list[Flavor], outputs: Iterable[AutoscalingOutput]) -> dict[str, Any] | None:
    """The flavors' node affinity with the autoscalers' hints folded in.

    Why per flavor: the required affinity is one OR'ed term per flavor, so a hint that belongs to one
    flavor (Karpenter's instance types of an A100 flavor) must go into that flavor's term only; put
    in every term it would forbid the other flavors' nodes and break the fallback order.
    """
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


@dataclass(frozen=True)
class RunnerSpec:
    """What every model-runner container of one Playground shares: the runtime's image, envs,
    resources, probes and lifecycle after the Playground's ``backendRuntimeConfig`` overrides."""

    image: str
    envs: list[dict[str, Any]]
    resources: dict[str, dict[str, Any]]
    shm: str | None
    """``sizeLimit`` of the ``/dev/shm`` memory volume, when any."""
    extra_args: list[str]
    port: int
    grace: int
    """terminationGracePeriodSeconds: long enough for the backend's preStop drain."""
    runtime: BackendRuntimeSpec


def build_runner_spec(
    backend_runtime: BackendRuntime,
    runtime_config: BackendRuntimeConfig | None,
    config: RecommendedConfig | None,
    backend: Backend | None,
) -> RunnerSpec:
    """Merge the BackendRuntime, the chosen recommended config and the Playground's overrides
    (version, envs, resources, shared memory and extra args win over the runtime's)."""
    runtime = backend_runtime.spec
    version = (runtime_config.version if runtime_config is not None else None) or runtime.version
    envs = merge_envs(
        [env_dict(e) for e in runtime.envs or []],
        [env_dict(e) for e in (runtime_config.envs if runtime_config else None) or []],
    )
    resources = merge_resources(
        config.resources if config else None, runtime_config.resources if runtime_config else None
    )
    shm_value = (runtime_config.shared_memory_size if runtime_config is not None else None) or (
        config.shared_memory_size if config else None
    )
    return RunnerSpec(
        image=f"{runtime.image}:{version}",
        envs=envs,
        resources=resources,
        shm=to_str(shm_value) if shm_value is not None else None,
        extra_args=list((runtime_config.args if runtime_config else None) or []),
        port=_port(backend_runtime, backend),
        grace=_grace_period(backend),
        runtime=runtime,
    )


def runner_container(
    spec: RunnerSpec, command: list[str] | None, args: list[str], *, serves_http: bool
) -> dict[str, Any]:
    """The ``model-runner`` container. Only a pod that serves HTTP gets the port, probes and the
    preStop drain: a multi-host worker that only joins the leader would fail them forever."""
    c: dict[str, Any] = {"name": MODEL_RUNNER, "image": spec.image}
    if command:
        c["command"] = list(command)
    if args:
        c["args"] = args
    if spec.envs:
        c["env"] = copy.deepcopy(spec.envs)
    if spec.resources:
        c["resources"] = {k: dict(v) for k, v in spec.resources.items()}
    if serves_http:
        c["ports"] = [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}]
        if spec.runtime.lifecycle:
            c["lifecycle"] = copy.deepcopy(spec.runtime.lifecycle)
        for key, probe in (
            ("startupProbe", spec.runtime.startup_probe),
            ("livenessProbe", spec.runtime.liveness_probe),
            ("readinessProbe", spec.runtime.readiness_probe),
        ):
            if probe:
                c[key] = copy.deepcopy(probe)
    return c


@dataclass(frozen=True)
class AutoscalingResults:
    """What every autoscaler plugin returned for one Playground, in name order."""

    outputs: tuple[tuple[Autoscaler, AutoscalingOutput], ...]
    problems: tuple[AutoscalingProblem, ...]
    prune_kinds: tuple[tuple[str, str], ...]
    pod_labels: dict[str, str]
    pod_annotations: dict[str, str]


REASON_UNKNOWN_AUTOSCALER = "UnknownAutoscaler"


def run_autoscalers(autoscalers: Iterable[Autoscaler], request: AutoscalingInput) -> AutoscalingResults:
    """Ask each autoscaler (sorted by name, so the result never depends on plugin load order).

    An :data:`ANNOTATION_AUTOSCALER` naming no installed autoscaler is an ``UnknownAutoscaler``
    problem: each autoscaler leaves a Playground that chose another one alone, so a typo would
    otherwise leave it unscaled without a word. A problem, not an error: the Playground still serves,
    as with an autoscaler's own problems (a bad ``keda-metric`` value, say).
    """
    autoscalers = sorted(autoscalers, key=lambda a: a.name)
    outputs: list[tuple[Autoscaler, AutoscalingOutput]] = []
    problems: list[AutoscalingProblem] = []
    requested = request.requested_autoscaler
    if requested is not None and requested not in {a.name for a in autoscalers}:
        problems.append(
            AutoscalingProblem(
                REASON_UNKNOWN_AUTOSCALER,
                f"annotation {ANNOTATION_AUTOSCALER}={requested!r} names no installed autoscaler "
                f"({known_names('autoscalers', (a.name for a in autoscalers))}); no autoscaler scales "
                "this Playground",
            )
        )
    prune: list[tuple[str, str]] = []
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for scaler in autoscalers:
        out = scaler.render(request)
        outputs.append((scaler, out))
        problems.extend(out.problems)
        prune.extend(kind for kind in scaler.managed_kinds if kind not in prune)
        labels.update(out.pod_labels)
        annotations.update(out.pod_annotations)
    return AutoscalingResults(tuple(outputs), tuple(problems), tuple(prune), labels, annotations)


def inference_service(
    playground: Playground,
    claimed: Claimed,
    workload: LeaderWorkerTemplate,
    *,
    skip_loader: bool,
    selected_flavor: str | None,
) -> Service:
    """The inference Service of a Playground, around its rendered workload template.

    Only the fields llmaz sets are passed, so ``to_manifest()`` (which keeps set fields only) writes
    exactly those and leaves the API defaults implicit.
    """
    meta = ObjectMeta(name=playground.name, labels={MANAGED_BY: MANAGER, LABEL_MODEL_NAME: claimed.main.name})
    # assigned only when present: an assigned field counts as set, and the manifest holds set fields only
    if playground.metadata.namespace:
        meta.namespace = playground.metadata.namespace
    annotations: dict[str, str] = {}
    if skip_loader:
        annotations[ANNOTATION_SKIP_MODEL_LOADER] = "true"
    if selected_flavor is not None:
        # the operator fell back to this flavor; the Service render must apply its accelerator counts
        annotations[ANNOTATION_SELECTED_FLAVOR] = selected_flavor
    if annotations:
        meta.annotations = annotations
    # every role is written out, the default main included
    refs = [ModelRef(name=r.name, role=r.role) for r in claimed.refs]
    if claimed.explicit_flavors:
        claims = ModelClaims(models=refs, inference_flavors=[f.name for f in claimed.flavors])
    else:
        claims = ModelClaims(models=refs)
    return Service(
        api_version=Service.api_version_string(),
        kind=Service.kind_name(),
        metadata=meta,
        spec=ServiceSpec(
            model_claims=claims,
            replicas=playground.spec.replicas,
            workload_template=workload,
            rollout_strategy=DEFAULT_ROLLOUT_STRATEGY.model_copy(deep=True),
        ),
    )


def autoscaler_children(
    outputs: Sequence[tuple[Autoscaler, AutoscalingOutput]], namespace: str | None
) -> list[dict[str, Any]]:
    """The autoscalers' objects, in the Playground's namespace and labelled as managed by llmaz.

    :raises InvalidManifest: an autoscaler rendered an object into another namespace (an owner
        reference cannot cross namespaces, so it would never be cleaned up).
    """
    children: list[dict[str, Any]] = []
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
            children.append(child)
    return children


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
    namespace = playground.metadata.namespace
    annotations = playground.metadata.annotations or {}
    skip_loader = annotations.get(ANNOTATION_SKIP_MODEL_LOADER) == "true"
    claimed = resolve_claims(spec.model_claim, spec.model_claims, models)
    runtime_config = spec.backend_runtime_config
    backend_name = runtime_config.backend_name if runtime_config is not None else DEFAULT_BACKEND
    if backend_runtime is None:
        raise BackendRuntimeNotFound(
            "spec.backendRuntimeConfig.backendName", f"BackendRuntime {backend_name!r} not found"
        )
    flavors = list(claimed.flavors)
    selected = flavor_mod.select_flavor(flavors, flavor, field=claimed.flavors_field)
    recipe = backend.multi_host_recipe() if backend is not None else None
    size = group_size(selected, recipe, claimed.flavors_field)
    config_name = infer_config_name(playground, claimed)
    explicit_config = runtime_config is not None and bool(runtime_config.config_name)
    if size > 1 and recipe is not None and not explicit_config:
        # resources and shared memory of a multi-host group come from the recipe's config
        names = {c.name for c in backend_runtime.spec.recommended_configs or []}
        if recipe.config_name in names:
            config_name = recipe.config_name
    config = _find_config(backend_runtime, config_name, explicit_config)

    spans = size > 1 and recipe is not None and recipe.tensor_parallel_spans_group
    variables, hints = template_variables(claimed, selected, skip_loader, tp_pods=size if spans else 1)

    runner_spec = build_runner_spec(backend_runtime, runtime_config, config, backend)
    args_field = "spec.backendRuntimeConfig.configName"

    # Autoscalers first: their pod labels/annotations/affinity hints go into the templates.
    scaling = run_autoscalers(
        autoscalers,
        AutoscalingInput(
            playground=playground,
            models=[s.model for s in claimed.sources],
            backend_runtime=backend_runtime,
            config_name=config_name,
            flavors=flavors,
            engine_metrics=backend.key_metrics if backend is not None else None,
        ),
    )
    main = claimed.main
    pod_labels = {
        **scaling.pod_labels,
        LABEL_MODEL_NAME: main.name,
        LABEL_MODEL_FAMILY_NAME: main.model.spec.family_name,
    }
    pod_annotations = dict(scaling.pod_annotations)
    if flavors:
        pod_annotations[ANNOTATION_FLAVORS] = ",".join(f.name for f in flavors)

    # Only flavors with the selected flavor's accelerator counts may share one pod template: a pod
    # asking for 8 GPUs must not land on a 1-GPU fallback node. The others wait for a fallback render.
    compatible = flavor_mod.compatible(flavors, selected)
    affinity = _with_hints(compatible, (o for _, o in scaling.outputs))

    settings = playground.spec.pod

    def template(container: dict[str, Any]) -> dict[str, Any]:
        t = _pod_template(
            container=container,
            shm=runner_spec.shm,
            grace=runner_spec.grace,
            labels={**((settings.labels or {}) if settings else {}), **pod_labels},
            annotations={**((settings.annotations or {}) if settings else {}), **pod_annotations},
        )
        if settings is not None:
            _apply_pod_settings(t["spec"], settings)
        pod_affinity = _pod_affinity(affinity, settings)
        if pod_affinity:
            t["spec"]["affinity"] = pod_affinity
        return t

    extra_args = runner_spec.extra_args
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
        workload = LeaderWorkerTemplate(
            size=size,
            restart_policy=RestartPolicy.RECREATE_GROUP_ON_POD_RESTART,
            leader_template=template(
                runner_container(
                    runner_spec, recipe.leader_command, leader_args + extra_args, serves_http=True
                )
            ),
            worker_template=template(
                runner_container(
                    runner_spec,
                    recipe.worker_command,
                    worker_args + extra_args,
                    serves_http=recipe.worker_serves_http,
                )
            ),
        )
    else:
        args = (
            templating.render_args(
                config.args or [], variables, config=config.name, field=args_field, hints=hints
            )
            if config is not None
            else []
        )
        args += _tensor_parallel_args(backend, selected, args + extra_args, claimed.flavors_field)
        workload = LeaderWorkerTemplate(
            worker_template=template(
                runner_container(
                    runner_spec, backend_runtime.spec.command, args + extra_args, serves_http=True
                )
            )
        )

    service = inference_service(
        playground,
        claimed,
        workload,
        skip_loader=skip_loader,
        selected_flavor=selected.name if flavor is not None and selected is not None else None,
    )
    objects = [service.to_manifest(), *autoscaler_children(scaling.outputs, namespace)]
    return Rendered(
        objects=tuple(objects),
        service=service,
        prune_kinds=scaling.prune_kinds,
        config_name=config_name,
        flavor=selected.name if selected else None,
        problems=scaling.problems,
    )
