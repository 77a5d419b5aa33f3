"""pydantic models -> structural OpenAPI v3 schemas (the CRDs' ``openAPIV3Schema``), pure.

The JSON schema of a kind's model is turned into a structural schema: every ``$ref`` inlined,
camelCase names, defaults, enums, bounds, descriptions and the CEL rules of
:class:`llmaz.api._base.CelRule`. Nodes marked with ``x-llmaz-k8s-definition`` (embedded Kubernetes
types) are filled in by an :class:`EmbeddedSchemas` source: ``llmaz_devkit.crdgen`` passes the pinned
Kubernetes OpenAPI; :data:`OPAQUE_EMBEDDED` keeps them open, which is what the offline CEL
validator needs (no rule looks inside an embedded Kubernetes type's own schema).
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from llmaz.api._base import Resource
from llmaz.api.k8s import K8S_BOUNDS_KEY, K8S_SCHEMA_KEY

__all__ = ["OPAQUE_EMBEDDED", "SCHEMA_KEYWORDS", "EmbeddedSchemas", "Schema", "root_schema"]

Schema = dict[str, Any]


class EmbeddedSchemas(Protocol):
    """Where the schemas of embedded Kubernetes definitions come from."""

    def schema(self, name: str) -> Schema: ...


class _Opaque:
    """Every embedded Kubernetes type as an open object (its own fields are not described)."""

    def schema(self, name: str) -> Schema:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


OPAQUE_EMBEDDED: EmbeddedSchemas = _Opaque()


# Keywords a CRD's JSONSchemaProps accepts (vendor extensions are handled separately).
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "description",
        "properties",
        "items",
        "additionalProperties",
        "required",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
        "nullable",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)


def _apply_bounds(schema: Schema, bounds: dict[str, Schema]) -> None:
    for dotted, keywords in bounds.items():
        node = schema
        for part in dotted.split("."):
            while node.get("type") == "array":
                node = node["items"]
            node = node["properties"][part]
        node.update(keywords)


def _without_nulls(value: Any) -> Any:
    """A model default as JSON without its unset (None) fields: a null is not a valid value of a
    structural schema node, and an unset field is simply absent."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return copy.deepcopy(value)


class _ModelConverter:
    def __init__(self, defs: dict[str, Schema], openapi: EmbeddedSchemas) -> None:
        self.defs = defs
        self.openapi = openapi

    def convert(self, node: Schema, stack: tuple[str, ...] = ()) -> Schema:
        node = dict(node)
        siblings: Schema = {}
        if "$ref" in node:
            name = str(node.pop("$ref")).rsplit("/", 1)[-1]
            if name in stack:
                raise ValueError(f"recursive model {name} cannot be expressed in a structural schema")
            siblings = node
            node = dict(self.defs[name])
            stack = (*stack, name)
        elif "anyOf" in node and any(branch.get("type") == "null" for branch in node["anyOf"]):
            branches = [branch for branch in node.pop("anyOf") if branch.get("type") != "null"]
            if len(branches) != 1:
                raise ValueError(f"unsupported union in model schema: {branches}")
            return self.convert({**branches[0], **node}, stack)
        if K8S_SCHEMA_KEY in node:
            definition = str(node[K8S_SCHEMA_KEY])
            out = self.openapi.schema(definition)
            bounds = {**node.get(K8S_BOUNDS_KEY, {}), **siblings.get(K8S_BOUNDS_KEY, {})}
            if bounds and "properties" in out:
                _apply_bounds(out, bounds)
            out[K8S_SCHEMA_KEY] = definition
            for key in ("description", "default"):
                value = siblings.get(key, node.get(key))
                if value is not None:
                    out[key] = value
            return out
        merged = {**node, **{k: v for k, v in siblings.items() if k != K8S_BOUNDS_KEY}}
        out = {}
        for key, value in merged.items():
            if key in ("title", "$defs", K8S_BOUNDS_KEY) or (key == "default" and value is None):
                continue
            if key == "additionalProperties" and not isinstance(value, dict):
                continue  # pydantic's `false` (extra="forbid"): pruning does this in a CRD
            if key == "properties":
                out[key] = {prop: self.convert(sub, stack) for prop, sub in value.items()}
            elif key in ("items", "additionalProperties"):
                out[key] = self.convert(value, stack)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
                out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
                out[key] = True
            elif key == "default":
                out[key] = _without_nulls(value)
            elif key in SCHEMA_KEYWORDS:
                out[key] = copy.deepcopy(value)
            else:
                raise ValueError(f"unsupported JSON-schema keyword {key!r} in the models")
        if "properties" in out:
            out.setdefault("type", "object")
        if "type" not in out and "enum" in out:
            out["type"] = "string"
        return out


def root_schema(kind: type[Resource], openapi: EmbeddedSchemas) -> Schema:
    raw = kind.model_json_schema(by_alias=True, mode="validation")
    converted = _ModelConverter(raw.get("$defs", {}), openapi).convert(raw)
    props = converted["properties"]
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion of this representation of the object.",
    }
    props["kind"] = {"type": "string", "description": "Kind of the object, in CamelCase."}
    # Only name (and generateName) may be described at the root; declaring name lets CEL rules
    # report their errors at metadata.name instead of at the object root.
    props["metadata"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    converted["required"] = ["spec"]
    return converted
