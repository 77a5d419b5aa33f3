"""The one home of every name and default llmaz agrees on across layers.

Label and annotation keys, recommended-config names, the default backend, the grace period of
serving pods, the DNS-label rule and the ``{{ .Var }}`` template variables. Every other module
imports them from here; ``packages/core/tests/unit/test_one_home.py`` fails when a value is spelled
out anywhere else in core. Pure data: no imports beyond the standard library.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- labels and annotations
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "llmaz"
"""Value of :data:`MANAGED_BY` on every object llmaz renders."""
LABEL_MODEL_NAME = "llmaz.io/model-name"
LABEL_MODEL_FAMILY_NAME = "llmaz.io/model-family-name"
LABEL_PLAYGROUND = "llmaz.io/playground"
"""On autoscaler objects: the Playground they scale."""
ANNOTATION_MODEL_PREHEAT = "llmaz.io/model-preheat"
ANNOTATION_SKIP_MODEL_LOADER = "llmaz.io/skip-model-loader"
ANNOTATION_FLAVORS = "llmaz.io/inference-service-flavors"
"""The claimed flavors, comma-separated, on the pods of an inference Service."""
ANNOTATION_RENDER_HASH = "llmaz.io/render-hash"
"""On every child the operator writes: a hash of what it rendered for it. A child whose hash is
not the current render's is applied again, so a field the render no longer sets (an env var, a GPU
limit) is removed by server-side apply even though the live object still holds everything else."""
ANNOTATION_SELECTED_FLAVOR = "llmaz.io/selected-flavor"
"""Set on a Playground's inference Service when the operator selected a fallback flavor, so the
Service render applies the same flavor's accelerator counts."""

# ---------------------------------------------------------------- backends and their configs
DEFAULT_BACKEND = "vllm"
"""``backendRuntimeConfig.backendName`` when a Playground does not name one (llmaz's default)."""
DEFAULT_CONFIG = "default"
SPECULATIVE_CONFIG = "speculative-decoding"
"""Chosen automatically when a Playground claims a main and a draft model."""
MULTI_HOST_CONFIG = "multi-host"
"""The config of a backend's leader/worker recipe for LeaderWorkerSet groups."""
MODEL_RUNNER = "model-runner"
"""Name of the container that serves the model."""
DEFAULT_GRACE_PERIOD_SECONDS = 130
"""terminationGracePeriodSeconds of serving pods; a preStop drain must finish well before it."""

# ---------------------------------------------------------------- names
DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""RFC 1123 label characters (the length, at most 63, is checked apart: CEL needs both)."""
DNS_LABEL_MAX_LENGTH = 63
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
"""A Kubernetes label value (at most 63 characters, checked apart)."""
CHILD_NAME_MAX_LENGTH = DNS_LABEL_MAX_LENGTH - len("-lb")
"""Longest Playground or inference Service name: its ``<name>-lb`` Service must be a DNS-1035 label."""


def is_dns_label(name: str) -> bool:
    """Whether ``name`` is a DNS-1123 label: object names, plugin names."""
    return len(name) <= DNS_LABEL_MAX_LENGTH and _DNS_LABEL.match(name) is not None


# ---------------------------------------------------------------- args templating
PLACEHOLDER = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")
"""A llmaz args placeholder such as ``{{ .ModelPath }}`` (spaces optional, leading dot mandatory)."""
MODEL_PATH = "ModelPath"
MODEL_NAME = "ModelName"
DRAFT_MODEL_PATH = "DraftModelPath"
TP = "TP"
PP = "PP"
INSTANCE_TYPE = "INSTANCE_TYPE"
KNOWN_VARIABLES: frozenset[str] = frozenset({MODEL_PATH, MODEL_NAME, DRAFT_MODEL_PATH, TP, PP, INSTANCE_TYPE})
"""Every variable render fills (model path/name, draft model path, flavor parallelism and instance
type); others are an error even when a value happens to exist."""


def placeholder(variable: str) -> str:
    """The canonical spelling of a placeholder: ``placeholder("ModelPath") == "{{ .ModelPath }}"``."""
    return "{{ ." + variable + " }}"
