"""Kubernetes OpenAPI (swagger v2) -> structural OpenAPI v3, for the Kubernetes types llmaz embeds.

The pinned Kubernetes swagger.json comes from ``$LLMAZ_K8S_OPENAPI`` or ``tools/k8s-openapi.sh``
(fetched into the shared Go module cache). Embedded definitions are converted the way controller-gen
converts embedded Kubernetes types.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from llmaz.api.schema import SCHEMA_KEYWORDS, Schema
from llmaz_devkit.repo import repo_root

__all__ = [
    "INT_OR_STRING",
    "OBJECT_META",
    "QUANTITY",
    "QUANTITY_PATTERN",
    "KubernetesOpenAPI",
    "k8s_openapi_path",
]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _int_or_string() -> Schema:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def _quantity() -> Schema:
    out = _int_or_string()
    out["pattern"] = QUANTITY_PATTERN
    return out


def _embedded_object_meta() -> Schema:
    """What controller-gen emits for ObjectMeta inside a pod template (generateEmbeddedObjectMeta)."""
    return {
        "type": "object",
        "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


class KubernetesOpenAPI:
    """Definitions of the pinned Kubernetes OpenAPI, converted on demand."""

    def __init__(self, swagger: dict[str, Any]) -> None:
        self._defs: dict[str, Schema] = swagger["definitions"]

    @classmethod
    def load(cls, path: Path | None = None) -> KubernetesOpenAPI:
        return cls(json.loads((path or k8s_openapi_path()).read_text()))

    def has(self, name: str) -> bool:
        return name in self._defs

    def schema(self, name: str) -> Schema:
        """The structural schema of one definition, every reference inlined, descriptions dropped."""
        return self._definition(name, ())

    def _definition(self, name: str, stack: tuple[str, ...]) -> Schema:
        if name == QUANTITY:
            return _quantity()
        if name == INT_OR_STRING:
            return _int_or_string()
        if name == OBJECT_META:
            return _embedded_object_meta()
        if name in stack:  # a recursive type: keep it open rather than loop forever
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if name not in self._defs:
            raise KeyError(f"definition {name!r} is not in the Kubernetes OpenAPI")
        return self._node(self._defs[name], (*stack, name))

    def _node(self, node: Schema, stack: tuple[str, ...]) -> Schema:
        if "$ref" in node:
            ref = self._definition(str(node["$ref"]).rsplit("/", 1)[-1], stack)
            if "default" in node and "default" not in ref:
                ref["default"] = copy.deepcopy(node["default"])
            return ref
        out: Schema = {}
        for key, value in node.items():
            if key in ("description", "enum") or key not in SCHEMA_KEYWORDS:
                continue  # descriptions inside embedded types are dropped to keep the CRDs small
            if key == "properties":
                out[key] = {prop: self._node(sub, stack) for prop, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self._node(value, stack)
            elif key in ("allOf", "anyOf", "oneOf"):
                out[key] = [self._node(sub, stack) for sub in value]
            else:
                out[key] = copy.deepcopy(value)
        if "type" not in out and "properties" not in out and not out.get("x-kubernetes-int-or-string"):
            # e.g. RawExtension: an arbitrary JSON object
            out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        elif "type" not in out:
            out["type"] = "object"
        if out.get("x-kubernetes-list-type") == "map":
            _default_list_map_keys(out)
        return out


# Defaults the Go types declare with `+default` markers (not in the OpenAPI), which controller-gen
# emits: a structural schema needs every list-map key to be required or defaulted.
_LIST_MAP_KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


def _default_list_map_keys(node: Schema) -> None:
    items = node["items"]
    required = set(items.get("required", ()))
    for key in node.get("x-kubernetes-list-map-keys", ()):
        prop = items["properties"][key]
        if key in required or "default" in prop:
            continue
        if key in _LIST_MAP_KEY_DEFAULTS:
            prop["default"] = _LIST_MAP_KEY_DEFAULTS[key]
        elif prop.get("type") == "string":
            prop["default"] = ""
        else:
            raise ValueError(f"list-map key {key!r} is neither required nor defaulted")


def k8s_openapi_path() -> Path:
    """Path of the pinned Kubernetes swagger.json (``$LLMAZ_K8S_OPENAPI`` or tools/k8s-openapi.sh)."""
    env = os.environ.get("LLMAZ_K8S_OPENAPI")
    if env:
        return Path(env)
    script = repo_root() / "tools" / "k8s-openapi.sh"
    out = subprocess.run([str(script)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


@cache
def _default_openapi() -> KubernetesOpenAPI:
    return KubernetesOpenAPI.load()
