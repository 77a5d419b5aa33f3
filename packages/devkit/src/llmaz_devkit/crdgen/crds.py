"""The four CustomResourceDefinitions, built from the :mod:`llmaz.api` models."""

from __future__ import annotations

from typing import Any

from llmaz.api import KINDS, Resource
from llmaz.api._base import RULE_ID_KEY
from llmaz.api.k8s import K8S_SCHEMA_KEY
from llmaz.api.schema import Schema, root_schema
from llmaz_devkit.crdgen.kubernetes import KubernetesOpenAPI, _default_openapi

__all__ = ["crd", "crd_name", "crds", "internal_schema", "strip_private"]

_PRIVATE_KEYS = (K8S_SCHEMA_KEY, RULE_ID_KEY)


def internal_schema(kind: type[Resource], openapi: KubernetesOpenAPI | None = None) -> Schema:
    """The openAPIV3Schema of a kind, still carrying the private ``x-llmaz-*`` keys (rule ids,
    embedded definition names). For tests and docs; the CRDs carry :func:`strip_private`."""
    return root_schema(kind, openapi or _default_openapi())


def strip_private(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_private(v) for k, v in node.items() if k not in _PRIVATE_KEYS}
    if isinstance(node, list):
        return [strip_private(v) for v in node]
    return node


def _tidy(node: Any) -> Any:
    """Schema keywords in alphabetical order (as controller-gen writes them); properties keep the
    order of the model's fields."""
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key in sorted(node):
        value = node[key]
        if key == "properties":
            out[key] = {prop: _tidy(sub) for prop, sub in value.items()}
        elif key in ("default", "enum", "x-kubernetes-validations", "required", "x-kubernetes-list-map-keys"):
            out[key] = value
        else:
            out[key] = _tidy(value)
    return out


def crd_name(kind: type[Resource]) -> str:
    return f"{kind.plural}.{kind.group}"


def crd(kind: type[Resource], openapi: KubernetesOpenAPI | None = None) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind, as a dict."""
    schema = _tidy(strip_private(internal_schema(kind, openapi)))
    names: dict[str, Any] = {
        "kind": kind.kind_name(),
        "listKind": f"{kind.kind_name()}List",
        "plural": kind.plural,
        "singular": kind.kind_name().lower(),
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    if kind.categories:
        names["categories"] = list(kind.categories)
    subresources: dict[str, Any] = {"status": {}}
    if kind.scale is not None:
        scale = {
            "specReplicasPath": kind.scale.spec_replicas_path,
            "statusReplicasPath": kind.scale.status_replicas_path,
        }
        if kind.scale.label_selector_path:
            scale["labelSelectorPath"] = kind.scale.label_selector_path
        subresources["scale"] = scale
    version: dict[str, Any] = {"name": kind.version, "served": True, "storage": True}
    if kind.printer_columns:
        version["additionalPrinterColumns"] = [
            {
                "name": col.name,
                "type": col.type,
                "jsonPath": col.json_path,
                **({"description": col.description} if col.description else {}),
                **({"priority": col.priority} if col.priority is not None else {}),
            }
            for col in kind.printer_columns
        ]
    version["schema"] = {"openAPIV3Schema": schema}
    version["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(kind)},
        "spec": {
            "group": kind.group,
            "names": names,
            "scope": kind.scope,
            "versions": [version],
        },
    }


def crds(openapi: KubernetesOpenAPI | None = None) -> list[dict[str, Any]]:
    """The four CRDs, in dependency order."""
    return [crd(kind, openapi) for kind in KINDS]
