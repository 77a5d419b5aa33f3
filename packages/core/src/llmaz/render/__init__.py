"""Pure rendering: from the four llmaz kinds to every object the operator applies.

No I/O, no clock, no randomness, no Kubernetes client: the same input always gives the same
output, with stable env order, volume names and labels, so re-renders never cause rollouts.

* :func:`render_playground`: Playground -> inference Service (+ autoscaler objects such as an HPA).
* :func:`render_service`: inference Service -> LeaderWorkerSet + ``<name>-lb`` Service.
* :func:`plan`: the direct children of one object, with backend and BackendRuntime lookup (the
  operator and ``llmaz render`` both call it); :func:`plan_tree` follows a Playground down to its LWS.
* :func:`render_manifests`: a manifest stream -> everything the operator would create.

Rendered objects carry no ``ownerReferences``; the operator adds them when it applies, because
only it knows the owner's uid.
"""

from __future__ import annotations

from llmaz.render.errors import (
    BackendRuntimeNotFound,
    ConfigNotFound,
    FlavorNotFound,
    InvalidFlavor,
    InvalidManifest,
    InvalidModelClaims,
    InvalidModelSource,
    InvalidResources,
    InvalidWorkloadTemplate,
    ModelNotFound,
    MultiHostUnsupported,
    RenderError,
    RenderErrors,
    UnknownTemplateVariable,
)
from llmaz.render.manifests import PluginSource, RenderWarning, parse_document, render_manifests
from llmaz.render.objects import Rendered
from llmaz.render.plan import Plan, plan, plan_tree
from llmaz.render.playground import infer_config_name, render_playground
from llmaz.render.service import DEFAULT_MODEL_LOADER_IMAGE, render_service

__all__ = [
    "DEFAULT_MODEL_LOADER_IMAGE",
    "BackendRuntimeNotFound",
    "ConfigNotFound",
    "FlavorNotFound",
    "InvalidFlavor",
    "InvalidManifest",
    "InvalidModelClaims",
    "InvalidModelSource",
    "InvalidResources",
    "InvalidWorkloadTemplate",
    "ModelNotFound",
    "MultiHostUnsupported",
    "Plan",
    "PluginSource",
    "RenderError",
    "RenderErrors",
    "RenderWarning",
    "Rendered",
    "UnknownTemplateVariable",
    "infer_config_name",
    "parse_document",
    "plan",
    "plan_tree",
    "render_manifests",
    "render_playground",
    "render_service",
]
