"""Render a whole manifest stream, as ``llmaz render`` and the demo do."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from llmaz.api import BackendRuntime, OpenModel, Playground, Resource, Service, kind_for, parse_manifest
from llmaz.plugins.autoscaler import AutoscalingProblem
from llmaz.render.cache import SharedCache
from llmaz.render.errors import (
    BackendRuntimeNotFound,
    InvalidManifest,
    RenderError,
    RenderErrors,
    known_names,
)
from llmaz.render.integrations import render_integrations
from llmaz.render.plan import PluginSource, plan_tree
from llmaz.render.service import DEFAULT_MODEL_LOADER_IMAGE
from llmaz.render.workload import Workload, main_model_name, served_backend_name

__all__ = ["PluginSource", "RenderWarning", "field_path", "parse_document", "render_manifests"]


@dataclass(frozen=True)
class RenderWarning:
    """A problem that did not stop the render: what an autoscaler could not render for an object
    (the operator's status reason and message)."""

    kind: str
    name: str
    reason: str
    message: str


def field_path(loc: Iterable[int | str]) -> str:
    """``("spec", "models", 0, "name")`` -> ``spec.models[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def parse_document(doc: Mapping[str, Any], *, check_rules: bool = True) -> Resource:
    """Parse one llmaz manifest; :class:`InvalidManifest` lists every schema problem with its path.
    ``check_rules=False``: schema only, no offline CEL (for objects an API server has admitted)."""
    kind = str(doc.get("kind", ""))
    meta = doc.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    # The API server refuses an object without a name (a generateName is only resolved there), and
    # everything rendered is named after its owner: without a name we would print '' and '-lb'.
    problems = [] if name else [("metadata.name", _name_required(meta))]
    try:
        obj = parse_manifest(dict(doc), check_rules=check_rules)
    except ValidationError as exc:
        found = [(field_path(e["loc"]), e["msg"]) for e in exc.errors()]
        # for an empty name, "required" says all; the DNS-label rule's "(got )" adds nothing
        problems += [p for p in found if name or p[0] != "metadata.name"]
    except ValueError as exc:
        raise InvalidManifest("apiVersion", str(exc), kind=kind or None, name=name or None) from None
    if not problems:
        return obj
    first_field, first_reason = problems[0]
    raise InvalidManifest(first_field, first_reason, kind=kind or None, name=name or None, problems=problems)


def _name_required(meta: object) -> str:
    if isinstance(meta, Mapping) and meta.get("generateName"):
        return "required (render cannot know the name the API server would generate from generateName)"
    return "required"


def _with_owner(err: RenderError, obj: Resource) -> RenderError:
    if err.kind is None:
        err.kind = obj.kind
    if err.name is None:
        err.name = obj.name
    return err


def render_manifests(
    documents: Iterable[Mapping[str, Any] | None],
    *,
    plugins: PluginSource | None = None,
    model_loader_image: str = DEFAULT_MODEL_LOADER_IMAGE,
    model_cache: SharedCache | None = None,
    scheduler_name: str | None = None,
    warnings: list[RenderWarning] | None = None,
    integrations: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every object the operator would create for ``documents``.

    For each Playground (in document order): its inference Service, the LeaderWorkerSet and the
    ``<name>-lb`` Service that Service leads to, and its autoscaler objects. For each inference
    Service in the input: its LeaderWorkerSet and ``<name>-lb`` Service. OpenModels and
    BackendRuntimes are resolved from ``documents`` first, then BackendRuntimes from installed backend
    plugins. Documents of other kinds are ignored.

    Every object is tried, so one call reports every problem of the stream. ``warnings``, when
    given, gets what did not stop the render (an autoscaler's problems, such as the ``hpa`` plugin's
    ``NoScaleTrigger``), in document order. With ``integrations`` (the keyword arguments of
    :func:`~llmaz.render.integrations.render_integrations`, as ``OperatorConfig.integrations``
    gives them), the integration objects of every Playground and inference Service whose model is in
    ``documents`` follow, without the owner references the operator adds.

    :raises RenderError: the problem, with ``kind`` and ``name`` of the object at fault; when several
        objects fail, a :class:`RenderErrors` listing each of them in document order.
    """
    errors: list[RenderError] = []
    parsed: list[Resource] = []
    for doc in documents:
        if not doc or kind_for(str(doc.get("apiVersion", "")), str(doc.get("kind", ""))) is None:
            continue
        try:
            parsed.append(parse_document(doc))
        except RenderError as err:
            errors.append(err)
    seen: set[tuple[str, str, str]] = set()
    unique: list[Resource] = []
    for obj in parsed:
        key = (obj.kind, obj.metadata.namespace or "", obj.name)
        if key not in seen:
            unique.append(obj)
        else:
            errors.append(
                InvalidManifest(
                    "metadata.name",
                    f"{obj.kind} {obj.name!r} appears more than once in the input; applying it would "
                    "replace the earlier one",
                    kind=obj.kind,
                    name=obj.name,
                )
            )
        seen.add(key)
    parsed = unique
    models = {o.name: o for o in parsed if isinstance(o, OpenModel)}
    runtimes = {o.name: o for o in parsed if isinstance(o, BackendRuntime)}

    out: list[dict[str, Any]] = []
    for obj in parsed:
        try:
            if isinstance(obj, (Playground, Service)):
                problems: list[AutoscalingProblem] = []
                try:
                    out += plan_tree(
                        obj,
                        models,
                        runtimes,
                        plugins,
                        model_loader_image=model_loader_image,
                        model_cache=model_cache,
                        scheduler_name=scheduler_name,
                        problems=problems,
                    )
                except BackendRuntimeNotFound as err:
                    installed = plugins.backends if plugins is not None else {}
                    err.reason += f"; {known_names('backends', [*runtimes, *installed])}"
                    err.reason += "" if plugins is not None else " (plugins were not consulted)"
                    raise
                if warnings is not None:
                    warnings += [RenderWarning(obj.kind, obj.name, p.reason, p.message) for p in problems]
        except RenderError as err:
            errors.append(_with_owner(err, obj))
    if integrations is not None and not errors:
        try:
            out += render_integrations(_workloads(parsed, models, plugins), **integrations).all_objects()
        except RenderError as err:
            errors.append(err)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise RenderErrors(errors)
    return out


def _workloads(
    parsed: Iterable[Resource], models: Mapping[str, OpenModel], plugins: PluginSource | None
) -> list[Workload]:
    out = []
    for obj in parsed:
        if not isinstance(obj, (Playground, Service)):
            continue
        model = models.get(main_model_name(obj) or "")
        if model is None:
            continue
        backend_name = served_backend_name(obj)
        backend = plugins.get_backend(backend_name) if plugins is not None and backend_name else None
        out.append(Workload.of(obj, model, backend=backend))
    return out
