"""The API reference pages (``docs/reference/api``), generated from the same models as the CRDs.

The hand-written guide to the Python SDK is ``docs/reference/sdk.md``; the index links to it.
"""

from __future__ import annotations

import json

from llmaz.api import KINDS, Resource
from llmaz.api._base import RULE_ID_KEY, CelRule
from llmaz.api.k8s import K8S_SCHEMA_KEY
from llmaz.api.schema import Schema
from llmaz_devkit.crdgen.crds import internal_schema
from llmaz_devkit.crdgen.kubernetes import KubernetesOpenAPI, _default_openapi

__all__ = ["GENERATED_BY", "doc_pages", "rule_error"]

GENERATED_BY = "llmaz_devkit.crdgen"


_K8S_DOCS = "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.36/"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ").strip()


def _type_name(node: Schema) -> str:
    if K8S_SCHEMA_KEY in node:
        return f"Kubernetes `{str(node[K8S_SCHEMA_KEY]).rsplit('.', 1)[-1]}`"
    if node.get("x-kubernetes-int-or-string"):
        return "quantity" if "pattern" in node else "int or string"
    kind = node.get("type", "object")
    if kind == "array":
        return f"[]{_type_name(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type_name(node['additionalProperties'])}"
    if kind == "string" and node.get("format") == "date-time":
        return "date-time"
    return str(kind)


def _bounds(node: Schema) -> str:
    parts: list[str] = []
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    for key, label in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
        ("maxProperties", "max entries"),
    ):
        if key in node:
            parts.append(f"{label} {node[key]}")
    if "pattern" in node and not node.get("x-kubernetes-int-or-string"):
        parts.append(f"pattern `{node['pattern']}`")
    for inner in ("items", "additionalProperties"):
        sub = node.get(inner)
        if isinstance(sub, dict) and K8S_SCHEMA_KEY not in sub and sub.get("type") != "object":
            inner_bounds = _bounds(sub)
            if inner_bounds:
                parts.append(f"each: {inner_bounds}")
    return "; ".join(parts)


def _walk_fields(node: Schema, path: str, required: bool, rows: list[list[str]]) -> None:
    default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
    rows.append(
        [
            f"`{path}`" + (" (required)" if required else ""),
            _type_name(node),
            default,
            _bounds(node),
            str(node.get("description", "")),
        ]
    )
    if K8S_SCHEMA_KEY in node:
        return
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        node, path = node["items"], f"{path}[]"
    elif isinstance(node.get("additionalProperties"), dict):
        node, path = node["additionalProperties"], f"{path}.*"
    if K8S_SCHEMA_KEY in node:
        return
    needed = set(node.get("required", ()))
    for prop, sub in node.get("properties", {}).items():
        _walk_fields(sub, f"{path}.{prop}", prop in needed, rows)


def _walk_rules(node: Schema, path: str, out: list[tuple[str, Schema]]) -> None:
    if K8S_SCHEMA_KEY in node:
        return
    for rule in node.get("x-kubernetes-validations", ()):
        out.append((path, rule))
    for prop, sub in node.get("properties", {}).items():
        _walk_rules(sub, f"{path}.{prop}" if path else prop, out)
    for inner, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        sub = node.get(inner)
        if isinstance(sub, dict):
            _walk_rules(sub, path + suffix, out)


def _cel_rules() -> dict[str, CelRule]:
    """Every CEL rule declared by the models, by id."""
    from llmaz.api._base import ApiModel

    rules: dict[str, CelRule] = {}
    stack: list[type[ApiModel]] = [ApiModel]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        for rule in cls.__dict__.get("cel_rules", ()):
            rules[rule.id] = rule
    return rules


_REASON_TEXT = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
}
"""How the API server prints a rule's reason (Invalid value when the rule declares none)."""


def rule_error(path: str, rule: CelRule) -> str:
    """The error line the API server prints when ``rule`` (on the node at ``path``) fails, with a
    ``<placeholder>`` for the offending value; list items are written ``[i]``."""
    field = (path + (rule.field_path or "")).replace("[]", "[i]").lstrip(".") or "<nil>"
    text = f"{field}: {_REASON_TEXT[rule.reason or 'FieldValueInvalid']}: {rule.message}"
    if rule.value is not None:
        text += f" (got <{rule.value}>)"
    return text


def _kind_page(kind: type[Resource], schema: Schema) -> str:
    lines = [
        f"# {kind.kind_name()}",
        "",
        f"<!-- Generated by {GENERATED_BY} from the llmaz.api models. Do not edit. -->",
        "",
        " ".join((kind.__doc__ or "").split()),
        "",
        "| | |",
        "|---|---|",
        f"| apiVersion | `{kind.api_version_string()}` |",
        f"| kind | `{kind.kind_name()}` |",
        f"| scope | {kind.scope} |",
        f"| plural | `{kind.plural}` |",
        f"| short names | {', '.join(f'`{n}`' for n in kind.short_names) or '-'} |",
        f"| categories | {', '.join(f'`{n}`' for n in kind.categories)} |",
        f"| subresources | status{', scale' if kind.scale else ''} |",
        "",
        "## Fields",
        "",
        "Embedded Kubernetes types carry the full Kubernetes schema of the pinned version and are "
        f"documented in the [Kubernetes API reference]({_K8S_DOCS}).",
        "",
        "| Field | Type | Default | Validation | Description |",
        "|---|---|---|---|---|",
    ]
    rows: list[list[str]] = []
    needed = set(schema.get("required", ()))
    for top in ("spec", "status"):
        if top in schema["properties"]:
            _walk_fields(schema["properties"][top], top, top in needed, rows)
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    rules: list[tuple[str, Schema]] = []
    _walk_rules(schema, "", rules)
    lines += ["", "## Validation rules", ""]
    if not rules:
        lines += ["No CEL rules beyond the schema bounds above.", ""]
    else:
        lines += [
            "The API server evaluates these CEL rules (`x-kubernetes-validations`) at admission and "
            "rejects the object with the message shown.",
            "",
        ]
    declared = _cel_rules()
    for path, rule in rules:
        rule_id = str(rule[RULE_ID_KEY])
        cel = declared[rule_id]
        lines += [
            f"### `{rule_id}`",
            "",
            f"On `{path or '(the object)'}`. When it fails, the API server answers:",
            "",
            "```text",
            rule_error(path, cel),
            "```",
            "",
        ]
        if cel.doc:
            lines += [cel.doc, ""]
        lines += ["```cel", str(rule["rule"]), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def doc_pages(openapi: KubernetesOpenAPI | None = None) -> dict[str, str]:
    """The API reference pages: ``index.md`` and one ``<kind>.md`` per kind."""
    api = openapi or _default_openapi()
    pages: dict[str, str] = {}
    index = [
        "# API reference",
        "",
        f"<!-- Generated by {GENERATED_BY} from the llmaz.api models. Do not edit. -->",
        "",
        "Generated from the pydantic models in `llmaz.api`, the same source as the CRDs, so these pages "
        "cannot drift from the schema the API server enforces.",
        "",
        "| Kind | apiVersion | Scope | Short names |",
        "|---|---|---|---|",
    ]
    for kind in KINDS:
        page = f"{kind.kind_name().lower()}.md"
        pages[page] = _kind_page(kind, internal_schema(kind, api))
        index.append(
            f"| [{kind.kind_name()}]({page}) | `{kind.api_version_string()}` | {kind.scope} | "
            f"{', '.join(f'`{n}`' for n in kind.short_names)} |"
        )
    index += [
        "",
        "## Python SDK",
        "",
        "The same models are a Python API: build and parse manifests in code, with the schema and the "
        "CEL rules checked offline. See [the Python SDK guide](../sdk.md).",
    ]
    pages["index.md"] = "\n".join(index) + "\n"
    return pages
