"""Fuzz the real API server with objects generated from our own CRD schemas.

For OpenModel, Playground and BackendRuntime, Hypothesis generates ``spec`` values from the CRD's
OpenAPI schema (CEL ignored by the generator) and submits each with ``dryRun=All``:

* the server never answers with a 5xx: every bad input is a 4xx with causes;
* whatever the server admits parses into the :mod:`llmaz.api` models and passes the offline CEL
  evaluator — so the CRDs and the Python models cannot drift apart (an admitted object the models
  refuse would crash whatever reads it later).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmaz.api import BackendRuntime, OpenModel, Playground, Resource
from llmaz.api.validation import validate_manifest
from llmaz.cli.crds import crds_yaml
from llmaz.operator.kube import Kube, KubeError, resource_path
from llmaz_devkit.cluster import ControlPlane

KINDS: tuple[type[Resource], ...] = (OpenModel, Playground, BackendRuntime)
NAMESPACE = "default"
_names = itertools.count()


def _generatable(node: Any) -> Any:
    """The CRD schema as plain JSON Schema: int-or-string spelled out, Kubernetes extensions dropped."""
    if isinstance(node, list):
        return [_generatable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _generatable(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("anyOf", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string", "maxLength": 16}]
    if node.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        out["type"] = "object"
        out.setdefault("maxProperties", 0)
    return out


def from_schema(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for the OpenAPI subset our CRDs use (CEL aside). hypothesis-jsonschema would be
    the library for this, but its last release (0.23.1) no longer works with current Hypothesis."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties") or {}
        if props:
            required = [k for k in schema.get("required", []) if k in props]
            return st.fixed_dictionaries(
                {k: from_schema(props[k]) for k in required},
                optional={k: from_schema(v) for k, v in props.items() if k not in required},
            )
        values = schema.get("additionalProperties")
        if isinstance(values, Mapping):
            keys = st.from_regex(r"[a-z][a-z0-9.\-/]{0,20}", fullmatch=True)
            return st.dictionaries(keys, from_schema(values), max_size=min(schema.get("maxProperties", 3), 3))
        return st.just({})
    if kind == "array":
        items = from_schema(schema.get("items", {"type": "string"}))
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, min(schema.get("maxItems", 2), 2)))
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 24), 24)
        if schema.get("format") == "date-time":
            return st.datetimes().map(lambda d: d.replace(microsecond=0).isoformat() + "Z")
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda v: low <= len(v) <= high)
        return st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=low, max_size=high)
    if kind == "integer":
        return st.integers(schema.get("minimum", -3), min(schema.get("maximum", 20), 20))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if kind == "boolean":
        return st.booleans()
    return st.none()


GARBAGE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
"""Anything JSON: must be refused with a 4xx, never a 5xx."""


def _installed_crds() -> list[dict[str, Any]]:
    """The CRDs users install (shipped in the package), not ones regenerated from the models now:
    the point is to catch drift between the two."""
    return [d for d in yaml.safe_load_all(crds_yaml()) if d]


def _spec_schema(kind: type[Resource]) -> dict[str, Any]:
    crd = next(c for c in _installed_crds() if c["spec"]["names"]["kind"] == kind.kind_name())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return dict(_generatable(schema))


@pytest.fixture(scope="module")
def api(apiserver: ControlPlane) -> Iterator[Kube]:
    docs = _installed_crds()
    apiserver.apply(docs, "--server-side")
    apiserver.wait_established([d["metadata"]["name"] for d in docs])
    # Build the CEL environment before Hypothesis runs (celpy raises the recursion limit once).
    validate_manifest({"apiVersion": OpenModel.api_version_string(), "kind": "OpenModel", "metadata": {}})
    try:
        yield Kube.connect(apiserver.admin_kubeconfig)
    finally:
        # The tier A API server is shared by the session: leave it as found (a later client-side
        # `kubectl apply` of the same CRDs would otherwise meet server-side-applied objects).
        apiserver.delete_crds([d["metadata"]["name"] for d in docs])


def _submit(api: Kube, kind: type[Resource], spec: Any) -> tuple[int, Any]:
    name = f"fuzz-{next(_names)}"
    body = {"apiVersion": kind.api_version_string(), "kind": kind.kind_name(), "metadata": {"name": name}}
    body["spec"] = spec
    namespace = None if kind.scope == "Cluster" else NAMESPACE
    path = resource_path(kind.api_version_string(), kind.kind_name(), namespace)
    try:
        out = api.request("POST", path, query={"dryRun": "All"}, body=body, resource=kind.plural)
    except KubeError as exc:
        return exc.status, exc.message
    return 201, out


FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind_name() for k in KINDS])
def test_admitted_objects_parse_and_bad_ones_get_4xx(api: Kube, kind: type[Resource]) -> None:
    outcomes: dict[str, int] = {"admitted": 0, "rejected": 0}

    @FUZZ
    @given(spec=from_schema(_spec_schema(kind)) | GARBAGE)
    def check(spec: Any) -> None:
        status, out = _submit(api, kind, spec)
        assert status < 500, f"server error {status} for spec {spec!r}: {out}"
        if status >= 400:
            assert status in (400, 422), (status, out)
            outcomes["rejected"] += 1
            return
        outcomes["admitted"] += 1
        manifest = {k: v for k, v in out.items() if k != "status"}
        kind.from_manifest(manifest)  # raises if the models refuse what the server stored
        assert validate_manifest(manifest) == [], manifest

    check()
    # Both paths must really be exercised, or the property says nothing.
    assert outcomes["admitted"] > 0, outcomes
    assert outcomes["rejected"] > 0, outcomes
