"""Generate the four CRDs and their API reference pages from the pydantic models.

The models in :mod:`llmaz.api` are the only source: their JSON schemas are turned into structural
OpenAPI v3 schemas (every ``$ref`` inlined, camelCase names, defaults, enums, bounds, descriptions and
the CEL rules of :class:`llmaz.api._base.CelRule`). Nodes marked with ``x-llmaz-k8s-definition`` are
replaced by the real schema of that definition from the Kubernetes OpenAPI of the pinned version,
converted the way controller-gen converts embedded Kubernetes types.

Usage (from a checkout)::

    python -m llmaz.crdgen            # write CRDs into the chart, the package copy and the docs
    python -m llmaz.crdgen --check    # regenerate into memory, fail with a diff on drift
    python -m llmaz.crdgen --out DIR  # write the same tree under DIR

The Kubernetes OpenAPI is read from ``$LLMAZ_K8S_OPENAPI`` or from ``tools/k8s-openapi.sh``.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from llmaz.api import KINDS, Resource
from llmaz.api._base import RULE_ID_KEY, CelRule
from llmaz.api.k8s import K8S_SCHEMA_KEY
from llmaz.api.schema import SCHEMA_KEYWORDS, Schema, root_schema

CHART_DIR = Path("charts/llmaz/charts/crds")
PACKAGE_CRDS_DIR = Path("packages/core/src/llmaz/_crds")
DOCS_DIR = Path("docs/reference/api")
GENERATED_BY = "llmaz.crdgen"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

_PRIVATE_KEYS = (K8S_SCHEMA_KEY, RULE_ID_KEY)


# --------------------------------------------------------------------------------------------------
# Kubernetes OpenAPI (swagger v2) -> structural OpenAPI v3


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


def _find_repo_root() -> Path:
    for start in (Path.cwd(), Path(__file__).resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "tools" / "k8s-openapi.sh").is_file():
                return candidate
    raise FileNotFoundError("run llmaz.crdgen from a checkout of the llmaz repository")


def k8s_openapi_path() -> Path:
    """Path of the pinned Kubernetes swagger.json (``$LLMAZ_K8S_OPENAPI`` or tools/k8s-openapi.sh)."""
    env = os.environ.get("LLMAZ_K8S_OPENAPI")
    if env:
        return Path(env)
    script = _find_repo_root() / "tools" / "k8s-openapi.sh"
    out = subprocess.run([str(script)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


@cache
def _default_openapi() -> KubernetesOpenAPI:
    return KubernetesOpenAPI.load()


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


# --------------------------------------------------------------------------------------------------
# API reference pages

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
    index += ["", SDK_SECTION.strip()]
    pages["index.md"] = "\n".join(index) + "\n"
    return pages


SDK_SECTION = """
## Python SDK

The models are a public Python API (`llmaz.api`): build objects in code and get manifests out, or
parse manifests into typed objects. Field names are snake_case in Python and camelCase in manifests.
Manifests hold only the fields that were set, so parsing and dumping a manifest gives back the same
JSON; defaults are still visible on the typed objects. (The unit tests run this example.)

```python
import yaml
from pydantic import ValidationError

from llmaz.api import (
    ModelClaim,
    ModelHub,
    ModelSource,
    ModelSpec,
    OpenModel,
    Playground,
    PlaygroundSpec,
    parse_manifest,
    parse_manifests,
)

# Build in code -> manifests.
model = OpenModel.new(
    "qwen2-0--5b",
    spec=ModelSpec(
        family_name="qwen2",
        source=ModelSource(model_hub=ModelHub(model_id="Qwen/Qwen2-0.5B-Instruct")),
    ),
)
playground = Playground.new(
    "qwen2-0--5b",
    namespace="default",
    spec=PlaygroundSpec(model_claim=ModelClaim(model_name="qwen2-0--5b")),
)
text = yaml.safe_dump_all([model.to_manifest(), playground.to_manifest()], sort_keys=False)
print(text)  # ready for `kubectl apply -f -`
assert playground.to_manifest()["spec"] == {"modelClaim": {"modelName": "qwen2-0--5b"}}
assert playground.spec.replicas == 1  # the default, as the API server would set it

# Manifests -> typed objects (documents of other kinds are skipped).
objects = parse_manifests(yaml.safe_load_all(text))
assert objects == [model, playground]
assert isinstance(objects[1], Playground)

# Bad input fails with the field path, the value and the rule.
bad = playground.to_manifest()
bad["spec"]["replicas"] = -1
try:
    parse_manifest(bad)
except ValidationError as err:
    print(err)  # spec.replicas: Input should be greater than or equal to 0 [..., input_value=-1, ...]
    assert err.errors()[0]["loc"] == ("spec", "replicas")
else:
    raise AssertionError("replicas -1 was accepted")
```

The models check each field (types, enums, bounds, unknown fields). Rules across fields, such as
*exactly one of modelClaim or modelClaims*, are the CEL rules listed on each kind's page: the API
server enforces them, and the SDK evaluates them offline too: `OpenModel.new(...)`,
`from_manifest` and `parse_manifest` raise the same `ValidationError` for a broken rule (located at
the field the API server names, with its message), and `llmaz.api.validation.validate_manifest`
lists every failed rule of a manifest.
"""
"""The SDK section of the API reference index (its example is executed by the unit tests)."""


# --------------------------------------------------------------------------------------------------
# Rendering


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


_HEADER = f"# Generated by {GENERATED_BY} from the llmaz.api models. Do not edit.\n"


def _helm_template(text: str) -> str:
    """Turn a literal CRD into a chart template: escape template braces, add the keep annotation."""
    text = text.replace("{{", '{{ "{{" }}')
    keep = "{{- if .Values.keep }}\n  annotations:\n    helm.sh/resource-policy: keep\n{{- end }}\n"
    head, sep, tail = text.partition("metadata:\n")
    if not sep:
        raise ValueError("CRD without metadata")
    return head + sep + keep + tail


_CHART_YAML = """\
apiVersion: v2
name: crds
description: The llmaz CustomResourceDefinitions (generated from the llmaz.api models).
type: application
version: 0.1.0
"""

_CHART_VALUES = """\
# -- Keep the CRDs (and so every OpenModel, BackendRuntime, Playground and Service) when the release
# is uninstalled.
keep: true
"""


def generate(openapi: KubernetesOpenAPI | None = None) -> dict[Path, str]:
    """Every generated file, relative to the repository root."""
    api = openapi or _default_openapi()
    files: dict[Path, str] = {
        CHART_DIR / "Chart.yaml": _CHART_YAML,
        CHART_DIR / "values.yaml": _CHART_VALUES,
    }
    for kind in KINDS:
        text = _HEADER + dump_yaml(crd(kind, api))
        filename = f"{crd_name(kind)}.yaml"
        files[CHART_DIR / "templates" / filename] = _helm_template(text)
        files[PACKAGE_CRDS_DIR / filename] = text
    for name, text in doc_pages(api).items():
        files[DOCS_DIR / name] = text
    return files


def _owned_files(root: Path) -> Iterator[Path]:
    """Files under the generated directories, for spotting stale ones."""
    for directory, pattern in (
        (CHART_DIR / "templates", "*.yaml"),
        (PACKAGE_CRDS_DIR, "*.yaml"),
        (DOCS_DIR, "*.md"),
    ):
        for path in sorted((root / directory).glob(pattern)):
            yield path.relative_to(root)


def check(root: Path, files: dict[Path, str]) -> list[str]:
    """Differences between the generated files and the tree at ``root`` (empty when in sync)."""
    problems: list[str] = []
    for rel, text in files.items():
        path = root / rel
        current = path.read_text() if path.is_file() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"a/{rel}",
                f"b/{rel}",
            )
            problems.append("".join(diff) or f"{rel}: missing")
    for rel in _owned_files(root):
        if rel not in files:
            problems.append(f"{rel}: stale file, not generated any more (delete it)")
    return problems


def write(root: Path, files: dict[Path, str]) -> None:
    for rel in _owned_files(root):
        if rel not in files:
            (root / rel).unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmaz.crdgen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail with a diff when committed files drift")
    parser.add_argument("--out", type=Path, help="write the generated tree under this directory")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        problems = check(args.out or _find_repo_root(), files)
        if problems:
            sys.stdout.write("\n".join(problems) + "\n")
            sys.stderr.write(
                "generated CRDs/docs drift from the models: run `python -m llmaz.crdgen` and commit\n"
            )
            return 1
        print(f"{len(files)} generated files are up to date")
        return 0
    root = args.out or _find_repo_root()
    write(root, files)
    print(f"wrote {len(files)} files under {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
