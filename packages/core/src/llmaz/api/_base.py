"""Shared building blocks of the API models: camelCase JSON, manifest I/O and object metadata."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with camelCase keys, holding only the fields that were set.

        Fields left at their defaults are omitted so that ``parse -> to_dict`` round-trips a
        manifest byte for byte; defaults are still visible through the attributes.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


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
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: ConditionStatus
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(max_length=32768)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)


Scope = Literal["Namespaced", "Cluster"]


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
        """Build an object in code: ``Playground.new("qwen", spec=PlaygroundSpec(...))``."""
        meta = ObjectMeta(name=name, namespace=namespace) if namespace else ObjectMeta(name=name)
        return cls(api_version=cls.api_version_string(), kind=cls.kind_name(), metadata=meta, **fields)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> Self:
        """Parse one manifest dict (as loaded from YAML/JSON) into a typed object."""
        obj = cls.model_validate(data)
        if obj.api_version != cls.api_version_string() or obj.kind != cls.kind_name():
            raise ValueError(
                f"expected apiVersion {cls.api_version_string()} kind {cls.kind_name()}, "
                f"got apiVersion {obj.api_version} kind {obj.kind}"
            )
        return obj

    def to_manifest(self) -> dict[str, Any]:
        """The manifest dict: camelCase, only fields that were set (defaults stay implicit)."""
        out = self.to_dict()
        out.setdefault("apiVersion", self.api_version)
        out.setdefault("kind", self.kind)
        return out

    @property
    def name(self) -> str:
        return self.metadata.name or ""
