"""``plan``: the desired children of one llmaz object, the single entry point that both
``llmaz render`` and the operator call.

It does the lookups around the render functions so that they happen the same way everywhere:

* the backend plugin of a Playground (``backendRuntimeConfig.backendName``, default ``vllm``);
* the BackendRuntime: the one given (a cluster object or a document), else, when
  ``plugin_runtimes`` is true, the one the backend plugin would apply;
* Playground -> inference Service hand-off: :func:`plan_tree` renders the Service a Playground
  leads to and then that Service's LeaderWorkerSet and ``<name>-lb`` Service.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmaz.api import BackendRuntime, OpenModel, Playground, Service
from llmaz.api.conventions import DEFAULT_BACKEND
from llmaz.plugins.autoscaler import Autoscaler, AutoscalingProblem
from llmaz.plugins.backend import Backend
from llmaz.render.cache import SharedCache
from llmaz.render.dra import DraSettings, render_dra
from llmaz.render.objects import LWS_API_VERSION
from llmaz.render.playground import render_playground
from llmaz.render.service import DEFAULT_MODEL_LOADER_IMAGE, render_service

__all__ = ["SERVICE_CHILD_KINDS", "Plan", "PluginSource", "backend_name", "plan", "plan_tree"]

SERVICE_CHILD_KINDS: tuple[tuple[str, str], ...] = ((LWS_API_VERSION, "LeaderWorkerSet"), ("v1", "Service"))
"""Kinds an inference Service's render produces; owned objects of these kinds it no longer
produces are pruned."""
INFERENCE_SERVICE_KIND = (Service.api_version_string(), Service.kind_name())


class PluginSource(Protocol):
    """What planning needs from a ``PluginManager``."""

    def get_backend(self, name: str) -> Backend | None: ...

    @property
    def backends(self) -> Mapping[str, Backend]: ...

    @property
    def autoscalers(self) -> Mapping[str, Autoscaler]: ...


@dataclass(frozen=True)
class Plan:
    """What one object should own.

    :param objects: children to apply, in a stable order, without owner references.
    :param service: for a Playground, its inference Service as the typed model (``objects[0]`` is
        its manifest).
    :param prune_kinds: ``(apiVersion, kind)`` pairs this plan manages: an object of one of these
        kinds controlled by the owner but absent from :attr:`objects` is stale.
    :param flavor: the flavor whose params and accelerator counts were applied.
    :param config_name: the recommended config used (Playgrounds).
    :param problems: what an autoscaler could not render (for status).
    """

    objects: tuple[dict[str, Any], ...]
    service: Service | None = None
    prune_kinds: tuple[tuple[str, str], ...] = ()
    flavor: str | None = None
    config_name: str | None = None
    problems: tuple[AutoscalingProblem, ...] = field(default_factory=tuple)


def backend_name(playground: Playground) -> str:
    """The BackendRuntime a Playground names (``vllm`` when it names none)."""
    brc = playground.spec.backend_runtime_config
    return brc.backend_name if brc is not None and brc.backend_name else DEFAULT_BACKEND


def _plan_playground(
    playground: Playground,
    models: Mapping[str, OpenModel],
    runtimes: Mapping[str, BackendRuntime],
    plugins: PluginSource | None,
    *,
    plugin_runtimes: bool,
    flavor: str | None,
) -> Plan:
    name = backend_name(playground)
    backend = plugins.get_backend(name) if plugins is not None else None
    runtime = runtimes.get(name)
    if runtime is None and plugin_runtimes and backend is not None:
        # An input, not an output: its CEL rules are checked where it is written (the API server,
        # or the plugin manager once per process), not again on every render (~1.6 ms each).
        runtime = backend.backend_runtime(check_rules=False)
    autoscalers: Iterable[Autoscaler] = list(plugins.autoscalers.values()) if plugins is not None else []
    rendered = render_playground(
        playground, models, runtime, backend=backend, autoscalers=autoscalers, flavor=flavor
    )
    kinds = [INFERENCE_SERVICE_KIND, *(k for k in rendered.prune_kinds if k != INFERENCE_SERVICE_KIND)]
    return Plan(
        objects=rendered.objects,
        service=rendered.service,
        prune_kinds=tuple(kinds),
        flavor=rendered.flavor,
        config_name=rendered.config_name,
        problems=rendered.problems,
    )


def _plan_service(
    service: Service,
    models: Mapping[str, OpenModel],
    backend: Backend | None,
    *,
    model_loader_image: str,
    model_cache: SharedCache | None,
    scheduler_name: str | None,
    dra: DraSettings | None,
) -> Plan:
    rendered = render_service(
        service,
        models,
        backend=backend,
        model_loader_image=model_loader_image,
        model_cache=model_cache,
        scheduler_name=scheduler_name,
    )
    # DRA mode (a flavor with DEVICE-CLASS, or dra.enabled) swaps GPU limits for a ResourceClaim;
    # the claim template kind is always pruned so leaving DRA mode deletes it.
    rendered = render_dra(rendered, service, models, dra, backend=backend)
    kinds = (*SERVICE_CHILD_KINDS, *(k for k in rendered.prune_kinds if k not in SERVICE_CHILD_KINDS))
    return Plan(objects=rendered.objects, prune_kinds=kinds, flavor=rendered.flavor)


def plan(
    obj: Playground | Service,
    models: Mapping[str, OpenModel],
    runtimes: Mapping[str, BackendRuntime] | None = None,
    plugins: PluginSource | None = None,
    *,
    plugin_runtimes: bool = True,
    model_loader_image: str = DEFAULT_MODEL_LOADER_IMAGE,
    model_cache: SharedCache | None = None,
    scheduler_name: str | None = None,
    flavor: str | None = None,
    backend: Backend | None = None,
    dra: DraSettings | None = None,
) -> Plan:
    """The direct children of ``obj``: for a Playground its inference Service and autoscaler
    objects, for an inference Service its LeaderWorkerSet and ``<name>-lb`` Service.

    :param models: OpenModels by name.
    :param runtimes: BackendRuntimes by name (the cluster's, or the documents').
    :param plugins: installed plugins (backends by name, autoscalers).
    :param plugin_runtimes: when a Playground's BackendRuntime is not in ``runtimes``, use the one
        its backend plugin would apply (``llmaz render``). The operator passes ``False``: it applies
        the plugins' BackendRuntimes itself, so the cluster is the only truth.
    :param model_cache: the shared per-node model cache (operator setting
        ``modelLoader.sharedCache``); ``None``: one ``emptyDir`` per model and pod.
    :param flavor: the claimed flavor to use (flavor fallback); default the first claimed.
    :param backend: for an inference Service, the backend plugin serving it (port fallback).
    :param dra: Dynamic Resource Allocation settings (operator config); ``None`` uses DRA only for
        flavors that name a device class.
    :raises RenderError: a typed subclass naming the field at fault.
    """
    if isinstance(obj, Playground):
        return _plan_playground(
            obj, models, runtimes or {}, plugins, plugin_runtimes=plugin_runtimes, flavor=flavor
        )
    return _plan_service(
        obj,
        models,
        backend,
        model_loader_image=model_loader_image,
        model_cache=model_cache,
        scheduler_name=scheduler_name,
        dra=dra,
    )


def plan_tree(
    obj: Playground | Service,
    models: Mapping[str, OpenModel],
    runtimes: Mapping[str, BackendRuntime] | None = None,
    plugins: PluginSource | None = None,
    *,
    model_loader_image: str = DEFAULT_MODEL_LOADER_IMAGE,
    model_cache: SharedCache | None = None,
    scheduler_name: str | None = None,
    problems: list[AutoscalingProblem] | None = None,
) -> list[dict[str, Any]]:
    """Everything ``obj`` leads to, as ``llmaz render`` prints it: for a Playground its inference
    Service, then that Service's LeaderWorkerSet and ``<name>-lb`` Service, then the autoscaler
    objects; for an inference Service its LeaderWorkerSet and ``<name>-lb`` Service.

    :param problems: when given, a Playground's autoscaler problems (:attr:`Plan.problems`) are
        appended to it.
    """
    settings: dict[str, Any] = {
        "model_loader_image": model_loader_image,
        "model_cache": model_cache,
        "scheduler_name": scheduler_name,
    }
    if isinstance(obj, Service):
        return list(plan(obj, models, **settings).objects)
    top = plan(obj, models, runtimes, plugins)
    if problems is not None:
        problems.extend(top.problems)
    if top.service is None:  # unreachable: a Playground's plan always holds its Service
        raise AssertionError("the plan of a Playground has no inference Service")
    service_doc, *rest = top.objects
    backend = plugins.get_backend(backend_name(obj)) if plugins is not None else None
    children = plan(top.service, models, backend=backend, **settings)
    return [service_doc, *children.objects, *rest]
