"""The CRDs' CEL rules (``x-kubernetes-validations``) evaluated offline with ``cel-python``.

The SDK runs them in :meth:`Resource.new <llmaz.api.Resource.new>` and
:meth:`Resource.from_manifest <llmaz.api.Resource.from_manifest>`, so code gets the API server's
field-level error before it ever talks to a cluster. Mirrors what the API server does at admission:
structural defaults are applied first, then every rule is evaluated on its node with ``self`` bound
to the node's value. The small part of the Kubernetes CEL library the llmaz rules use is provided
here: ``lowerAscii`` (strings extension), ``quantity`` / ``isQuantity`` with ``compareTo``,
``isLessThan`` and ``isGreaterThan`` (Kubernetes quantity library)::

    from llmaz.api.validation import CelValidator
    errors = CelValidator.for_kind(Playground).validate(manifest)   # [] when every rule holds
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from llmaz.api import quantity
from llmaz.api._base import RULE_ID_KEY, Resource
from llmaz.api.schema import OPAQUE_EMBEDDED, root_schema


def parse_quantity(text: str) -> Decimal | None:
    """The value of a Kubernetes quantity string, or None when it is not one."""
    return quantity.parse(text)


@dataclass(frozen=True)
class Quantity:
    """A CEL ``Quantity`` value (Kubernetes quantity library)."""

    value: Decimal


def _quantity(text: Any) -> Quantity:
    parsed = parse_quantity(str(text))
    if parsed is None:
        raise ValueError(f"invalid quantity {text!r}")
    return Quantity(parsed)


def _is_quantity(text: Any) -> celtypes.BoolType:
    return celtypes.BoolType(parse_quantity(str(text)) is not None)


def _compare_to(left: Quantity, right: Quantity) -> celtypes.IntType:
    return celtypes.IntType((left.value > right.value) - (left.value < right.value))


def _is_less_than(left: Quantity, right: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(left.value < right.value)


def _is_greater_than(left: Quantity, right: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(left.value > right.value)


def _lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in str(text)))


KUBERNETES_FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _compare_to,
    "isLessThan": _is_less_than,
    "isGreaterThan": _is_greater_than,
    "lowerAscii": _lower_ascii,
}
"""The Kubernetes CEL library functions the llmaz rules use."""


@dataclass(frozen=True)
class RuleFailure:
    """One failed (or erroring) rule: where, which rule, and the message the API server would show."""

    path: str
    rule_id: str
    message: str
    rule: str
    error: str | None = None
    field_path: str | None = None
    """The rule's ``fieldPath`` (relative to ``path``), when it declares one."""

    @property
    def field(self) -> str:
        """The field the API server names in its error: ``path`` plus the rule's ``fieldPath``
        (``spec.elasticConfig.minReplicas``); ``<nil>`` for a rule on the object root without one."""
        full = self.path + (self.field_path or "")
        return full.lstrip(".") or "<nil>"


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """A copy of ``value`` with the schema's defaults filled in, as the API server does."""
    if isinstance(value, dict):
        out = dict(value)
        for prop, sub in schema.get("properties", {}).items():
            if prop not in out and "default" in sub:
                out[prop] = copy.deepcopy(sub["default"])
            if prop in out:
                out[prop] = apply_defaults(out[prop], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in list(out):
                if key not in schema.get("properties", {}):
                    out[key] = apply_defaults(out[key], extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in value]
    return value


class CelValidator:
    """Evaluates every CEL rule of one kind's CRD schema on manifests of that kind."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._env = celpy.Environment()
        self._programs: dict[str, Any] = {}

    @classmethod
    @cache
    def for_kind(cls, kind: type[Resource]) -> CelValidator:
        return cls(root_schema(kind, OPAQUE_EMBEDDED))

    def _program(self, rule: str) -> Any:
        if rule not in self._programs:
            self._programs[rule] = self._env.program(self._env.compile(rule), functions=KUBERNETES_FUNCTIONS)
        return self._programs[rule]

    def rules(self) -> list[tuple[str, dict[str, Any]]]:
        """Every (path, validation) pair of the schema."""
        out: list[tuple[str, dict[str, Any]]] = []

        def walk(node: dict[str, Any], path: str) -> None:
            for rule in node.get("x-kubernetes-validations", ()):
                out.append((path, rule))
            for prop, sub in node.get("properties", {}).items():
                walk(sub, f"{path}.{prop}" if path else prop)
            for inner, suffix in (("items", "[]"), ("additionalProperties", ".*")):
                sub = node.get(inner)
                if isinstance(sub, dict):
                    walk(sub, path + suffix)

        walk(self.schema, "")
        return out

    def validate(self, manifest: dict[str, Any], *, defaults: bool = True) -> list[RuleFailure]:
        """Failures of every rule on ``manifest`` (empty when all hold)."""
        value = apply_defaults(manifest, self.schema) if defaults else manifest
        failures: list[RuleFailure] = []
        self._walk(value, self.schema, "", failures)
        return failures

    def _walk(self, value: Any, schema: dict[str, Any], path: str, failures: list[RuleFailure]) -> None:
        for rule in schema.get("x-kubernetes-validations", ()):
            failure = self._evaluate(value, rule, path)
            if failure is not None:
                failures.append(failure)
        if isinstance(value, dict):
            props = schema.get("properties", {})
            extra = schema.get("additionalProperties")
            for key, sub_value in value.items():
                sub_path = f"{path}.{key}" if path else key
                if key in props:
                    self._walk(sub_value, props[key], sub_path, failures)
                elif isinstance(extra, dict):
                    self._walk(sub_value, extra, sub_path, failures)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                self._walk(item, schema["items"], f"{path}[{index}]", failures)

    def _evaluate(self, value: Any, rule: dict[str, Any], path: str) -> RuleFailure | None:
        expression = str(rule["rule"])
        rule_id = str(rule.get(RULE_ID_KEY, expression))
        field_path = rule.get("fieldPath")
        try:
            result = self._program(expression).evaluate({"self": json_to_cel(value)})
        except Exception as exc:  # a rule that errors rejects the object, as in the API server
            return RuleFailure(path, rule_id, str(rule["message"]), expression, repr(exc), field_path)
        if isinstance(result, Exception):
            return RuleFailure(path, rule_id, str(rule["message"]), expression, repr(result), field_path)
        if bool(result):
            return None
        return RuleFailure(path, rule_id, self._message(value, rule), expression, None, field_path)

    def _message(self, value: Any, rule: dict[str, Any]) -> str:
        """The message the API server shows: ``messageExpression`` when it evaluates to a string,
        else the static ``message``."""
        expression = rule.get("messageExpression")
        if expression:
            try:
                result = self._program(str(expression)).evaluate({"self": json_to_cel(value)})
            except Exception:
                return str(rule["message"])
            if isinstance(result, str):
                return str(result)
        return str(rule["message"])


def validate_manifest(manifest: dict[str, Any]) -> list[RuleFailure]:
    """Evaluate the CEL rules of the manifest's kind (raises ValueError for non-llmaz kinds)."""
    from llmaz.api import kind_for

    kind = kind_for(str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    if kind is None:
        raise ValueError(f"not an llmaz kind: {manifest.get('apiVersion')} {manifest.get('kind')}")
    return CelValidator.for_kind(kind).validate(manifest)


def all_rule_ids() -> set[str]:
    """Ids of every CEL rule of the four kinds."""
    from llmaz.api import KINDS

    ids: set[str] = set()
    for kind in KINDS:
        for _path, rule in CelValidator.for_kind(kind).rules():
            ids.add(str(rule[RULE_ID_KEY]))
    return ids


def field_location(field: str) -> tuple[str | int, ...]:
    """``spec.models[0].name`` -> ``("spec", "models", 0, "name")``; ``<nil>`` (the root) -> ``()``."""
    if field == "<nil>":
        return ()
    loc: list[str | int] = []
    for part in field.split("."):
        name, *indexes = part.split("[")
        if name:
            loc.append(name)
        loc.extend(int(index.rstrip("]")) for index in indexes)
    return tuple(loc)


def check_rules(obj: Resource) -> None:
    """Raise :class:`pydantic.ValidationError` (one error per failed rule, located at the field the
    API server names, with its message) when ``obj`` breaks a CEL rule of its CRD."""
    manifest = obj.to_manifest()
    failures = CelValidator.for_kind(type(obj)).validate(manifest)
    if not failures:
        return
    details: list[InitErrorDetails] = [
        InitErrorDetails(
            type=PydanticCustomError("cel_rule", "{message}", {"message": f.message, "rule": f.rule_id}),
            loc=field_location(f.field),
            input=_value_at(manifest, field_location(f.field)),
        )
        for f in failures
    ]
    raise ValidationError.from_exception_data(type(obj).__name__, details)


def _value_at(value: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value
