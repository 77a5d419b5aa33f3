"""Pure rendering: from the four llmaz kinds to every object the operator applies.

No I/O, no clock, no randomness, no Kubernetes client: the same input always gives the same
output, with stable env order, volume names and labels, so re-renders never cause rollouts.

* :func:`render_playground`: Playground -> inference Service (+ autoscaler objects such as an HPA).
* :func:`render_service`: inference Service -> LeaderWorkerSet + ``<name>-lb`` Service.
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
from llmaz.render.manifests import PluginSource, parse_document, render_manifests
from llmaz.render.objects import Rendered
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
    "PluginSource",
    "RenderError",
    "RenderErrors",
    "Rendered",
    "UnknownTemplateVariable",
    "infer_config_name",
    "parse_document",
    "render_manifests",
    "render_playground",
    "render_service",
]
