"""Shared building blocks of the API models: camelCase JSON, manifest I/O and object metadata."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from llmaz.api.conventions import CHILD_NAME_MAX_LENGTH, DNS_LABEL_MAX_LENGTH, DNS_LABEL_PATTERN

RULE_ID_KEY = "x-llmaz-rule-id"
"""Private JSON-schema key naming a CEL rule; ``llmaz_devkit.crdgen`` strips it from the written CRDs."""

CelReason = Literal["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired"]
"""Reasons a rule may report. Not FieldValueDuplicate: the API server renders that one without the
rule's message, and the message is what users (and the e2e corpus) rely on."""


@dataclass(frozen=True)
class CelRule:
    """One ``x-kubernetes-validations`` entry of the node of the model that declares it.

    ``self`` in ``rule`` is the JSON value of that model (camelCase keys). The API server evaluates
    the rule at admission; ``message`` is what users see when it is false.
    """

    id: str
    rule: str
    message: str
    field_path: str | None = None
    reason: CelReason | None = None
    doc: str = ""
    """Longer explanation for the API reference (why the rule exists, llmaz differences)."""
    value: str | None = None
    """CEL expression (a string) showing the offending value; when set, the API server answers with
    ``<message> (got <value>)`` through ``messageExpression`` and falls back to ``message``."""

    @property
    def message_expression(self) -> str | None:
        if self.value is None:
            return None
        return f'"{self.message} (got " + {self.value} + ")"'

    def to_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.message_expression:
            out["messageExpression"] = self.message_expression
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        out[RULE_ID_KEY] = self.id
        return out


# Bounded strings: every string and list of the API has a bound, so CEL rules stay within the
# API server's cost budget and a typo cannot store megabytes.
Name = Annotated[str, StringConstraints(min_length=1, max_length=63)]
"""A Kubernetes object name or similar short identifier."""
ShortString = Annotated[str, StringConstraints(max_length=256)]
Arg = Annotated[str, StringConstraints(max_length=4096)]
"""One command-line argument or command word."""


class ApiModel(BaseModel):
    """Base of every spec/status type: camelCase JSON names, unknown fields rejected.

    Unknown fields are an error (a typo such as ``replica: 2`` must not silently do nothing);
    the CRDs generated from these models prune them the same way.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
        validate_default=True,
    )

    cel_rules: ClassVar[tuple[CelRule, ...]] = ()
    """CEL validation rules of this type's node in the CRD (see :class:`CelRule`)."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        rules: tuple[CelRule, ...] = cls.__dict__.get("cel_rules", ())
        if rules:
            target = handler.resolve_ref_schema(schema)
            target["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
        return schema

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with camelCase keys, holding only the fields that were set.

        Fields left at their defaults are omitted so that ``parse -> to_dict`` round-trips a
        manifest byte for byte; defaults are still visible through the attributes.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def drop_null_fields(value: Any) -> Any:
    """A copy of a JSON value without the ``null`` values of its mappings, at any depth, as the API
    server prunes them from a custom resource (see :meth:`Resource.from_manifest`)."""
    if isinstance(value, dict):
        return {k: drop_null_fields(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_null_fields(item) for item in value]
    return value


class ObjectMeta(BaseModel):
    """The subset of ``metav1.ObjectMeta`` that users write; other server-set fields are kept as-is."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A ``metav1.Condition``: one aspect of an object's observed state."""

    type: str = Field(
        description="Condition type in CamelCase, e.g. Available.",
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Machine-readable reason of the last transition, in CamelCase.",
    )
    message: str = Field(max_length=32768, description="Human-readable details.")
    last_transition_time: datetime = Field(description="When the status last changed.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was set for."
    )


Scope = Literal["Namespaced", "Cluster"]


NAME_IS_DNS_LABEL = CelRule(
    id="metadata-name-dns-label",
    rule=(
        "!has(self.metadata.name) || (size(self.metadata.name) <= "
        f"{DNS_LABEL_MAX_LENGTH} && "
        f"self.metadata.name.matches('{DNS_LABEL_PATTERN}'))"
    ),
    message=(
        "metadata.name must be a DNS-1123 label: at most 63 lowercase letters, digits or '-', "
        "starting and ending with a letter or digit (no dots)"
    ),
    value="self.metadata.name",
    field_path=".metadata.name",
    reason="FieldValueInvalid",
    doc=(
        "The name becomes a label value and the name of generated Services and pods, so it must be a "
        "DNS-1123 label (llmaz checks this on create only; the rule also holds on update, which cannot "
        "change a name anyway)."
    ),
)


NAME_FITS_CHILDREN = CelRule(
    id="metadata-name-fits-children",
    # only for names the DNS-label rule passes: a name breaking both gets that rule's one message
    rule=(
        "!has(self.metadata.name) || size(self.metadata.name) > "
        f"{DNS_LABEL_MAX_LENGTH} || !self.metadata.name.matches('{DNS_LABEL_PATTERN}') || "
        f"(size(self.metadata.name) <= {CHILD_NAME_MAX_LENGTH} && self.metadata.name.matches('^[a-z]'))"
    ),
    message=(
        f"metadata.name must start with a letter and be at most {CHILD_NAME_MAX_LENGTH} characters: "
        "the LeaderWorkerSet <name> and the Service <name>-lb llmaz creates for it need DNS-1035 "
        "labels (at most 63 characters, starting with a letter)"
    ),
    value="self.metadata.name",
    field_path=".metadata.name",
    reason="FieldValueInvalid",
    doc=(
        "llmaz names the workload's LeaderWorkerSet after the object and the Service in front of it "
        "`<name>-lb`; both must be DNS-1035 labels, so a name that starts with a digit or is longer "
        "than 60 characters could never be served (llmaz checked neither: the API server refused "
        "the children, and the object never became ready)."
    ),
)


class PrinterColumn(BaseModel):
    """An ``additionalPrinterColumns`` entry of a CRD version."""

    name: str
    type: str
    json_path: str
    description: str | None = None
    priority: int | None = None


class ScaleSubresource(BaseModel):
    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.selector"


class Resource(ApiModel):
    """A top-level kind: ``apiVersion``, ``kind``, ``metadata``, ``spec`` and ``status``.

    Class variables carry what the CRD needs (names, scope, printer columns, subresources), so the
    models are the only source of the generated CRDs.
    """

    model_config = ConfigDict(extra="forbid")

    group: ClassVar[str]
    version: ClassVar[str] = "v1alpha1"
    plural: ClassVar[str]
    short_names: ClassVar[tuple[str, ...]] = ()
    categories: ClassVar[tuple[str, ...]] = ("llmaz",)
    scope: ClassVar[Scope] = "Namespaced"
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = ()
    scale: ClassVar[ScaleSubresource | None] = None

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def api_version_string(cls) -> str:
        return f"{cls.group}/{cls.version}"

    @classmethod
    def kind_name(cls) -> str:
        return cls.__name__

    @classmethod
    def new(cls, name: str, *, namespace: str | None = None, **fields: Any) -> Self:
        """Build an object in code: ``Playground.new("qwen", spec=PlaygroundSpec(...))``.

        :raises pydantic.ValidationError: what the API server would refuse: the schema, and the CRD's
            CEL rules (a DNS-label name, min <= max replicas...), each at the field it names.
        """
        meta = ObjectMeta(name=name, namespace=namespace) if namespace else ObjectMeta(name=name)
        obj = cls(api_version=cls.api_version_string(), kind=cls.kind_name(), metadata=meta, **fields)
        obj.check_rules()
        return obj

    @classmethod
    def from_manifest(cls, data: dict[str, Any], *, check_rules: bool = True) -> Self:
        """Parse one manifest dict (as loaded from YAML/JSON) into a typed object.

        A field given as ``null`` counts as absent, everywhere (embedded pod templates included):
        the API server prunes such fields before defaulting and validation, since no field of the
        llmaz CRDs is ``nullable``, so ``revision: null`` gets the default and ``volumes: null`` is no
        list. Helm output often holds such nulls. Items of a list are kept as they are.

        ``check_rules=False`` is for objects read back from an API server (the operator), which
        enforced the rules and pruned the nulls when they were written: both steps are skipped (the
        copy without nulls was ~10 us of every parse in the operator's reconciles).

        :raises ValueError: the manifest is of another apiVersion/kind.
        :raises pydantic.ValidationError: what the API server would refuse (schema and CEL rules).
        """
        api_version, kind = data.get("apiVersion"), data.get("kind")
        if api_version != cls.api_version_string() or kind != cls.kind_name():
            raise ValueError(
                f"expected apiVersion {cls.api_version_string()} kind {cls.kind_name()}, "
                f"got apiVersion {api_version} kind {kind}"
            )
        if not check_rules:
            return cls.model_validate(data)
        obj = cls.model_validate(drop_null_fields(data))
        obj.check_rules()
        return obj

    def check_rules(self) -> None:
        """Evaluate the CRD's CEL rules offline; :class:`pydantic.ValidationError` on the first failure
        set, with the API server's field path and message for each failed rule."""
        from llmaz.api.validation import check_rules

        check_rules(self)

    def to_manifest(self) -> dict[str, Any]:
        """The manifest dict: camelCase, only fields that were set (defaults stay implicit)."""
        out = self.to_dict()
        out.setdefault("apiVersion", self.api_version)
        out.setdefault("kind", self.kind)
        return out

    @property
    def name(self) -> str:
        return self.metadata.name or ""
