"""``llmaz.io/v1alpha1``: OpenModel and the model-claim types shared by Playground and Service."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from llmaz.api._base import (
    NAME_IS_DNS_LABEL,
    ApiModel,
    CelRule,
    Condition,
    Name,
    PrinterColumn,
    Resource,
    Scope,
    ShortString,
)
from llmaz.api.conventions import (  # noqa: F401 (re-exported: the API's names for them)
    ANNOTATION_MODEL_PREHEAT,
    LABEL_MODEL_FAMILY_NAME,
    LABEL_MODEL_NAME,
    LABEL_VALUE_PATTERN,
)
from llmaz.api.k8s import ResourceList

GROUP = "llmaz.io"
VERSION = "v1alpha1"

# Labels and annotations with a meaning to llmaz.

HUGGINGFACE = "Huggingface"
MODELSCOPE = "ModelScope"
DEFAULT_OWNED_BY = "llmaz"
CONDITION_IN_USE = "InUse"
"""OpenModel and BackendRuntime condition: which Playgrounds and Services use the object (reason
``Referenced`` or ``Unused``; written by the operator)."""
MAX_FLAVORS = 8


class ModelHubName(StrEnum):
    HUGGINGFACE = HUGGINGFACE
    MODELSCOPE = MODELSCOPE


class ModelRole(StrEnum):
    MAIN = "main"
    DRAFT = "draft"


class ModelHub(ApiModel):
    """A model registry to download from (Hugging Face or ModelScope)."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="modelhub-filename-huggingface-only",
            rule="!has(self.filename) || !has(self.name) || self.name == 'Huggingface'",
            message="filename is only supported with the Huggingface model hub",
            value="'hub ' + self.name",
            field_path=".filename",
            reason="FieldValueForbidden",
        ),
        CelRule(
            id="modelhub-filename-no-patterns",
            rule="!has(self.filename) || (!has(self.allowPatterns) && !has(self.ignorePatterns))",
            message="filename cannot be combined with allowPatterns or ignorePatterns",
            field_path=".filename",
            reason="FieldValueForbidden",
        ),
    )

    name: ModelHubName = Field(
        default=ModelHubName.HUGGINGFACE, description="The model registry: Huggingface or ModelScope."
    )
    model_id: str = Field(
        alias="modelID",
        min_length=1,
        max_length=256,
        description="Repository id on the hub, e.g. meta-llama/Meta-Llama-3-8B.",
    )
    filename: str | None = Field(
        default=None,
        max_length=256,
        description=(
            "Download this one file instead of the whole repository (e.g. one GGUF quantisation). "
            "Huggingface only; leave allowPatterns and ignorePatterns unset with it."
        ),
    )
    revision: str = Field(
        default="main",
        max_length=256,
        description=(
            "Git revision: a branch, a tag or a commit hash. main, the default, is the hub's default "
            "branch: master on ModelScope."
        ),
    )
    allow_patterns: list[ShortString] | None = Field(
        default=None, max_length=64, description="Only files matching at least one glob are downloaded."
    )
    ignore_patterns: list[ShortString] | None = Field(
        default=None, max_length=64, description="Files matching any of these globs are not downloaded."
    )


_URI_SHAPE = "^[A-Za-z0-9]+://.+$"


class ModelSource(ApiModel):
    """Where the weights come from: a model hub, or a URI (``oss://``, ``s3://``, ``gcs://``,
    ``ollama://``, ``host://``). Exactly one of the two must be set."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="source-exactly-one",
            rule="has(self.modelHub) != has(self.uri)",
            message="exactly one of modelHub or uri must be set",
            reason="FieldValueInvalid",
            doc=(
                "llmaz rejected neither-set but let modelHub win silently when both were set; "
                "both is an error here."
            ),
        ),
        CelRule(
            id="uri-format",
            rule=f"!has(self.uri) || (self.uri.matches('{_URI_SHAPE}') && !self.uri.matches('://.*://'))",
            message="uri must look like <protocol>://<address>",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
        ),
        CelRule(
            id="uri-protocol",
            rule=(
                f"!has(self.uri) || !self.uri.matches('{_URI_SHAPE}') || "
                "self.uri.lowerAscii().matches('^(oss|s3|gcs|ollama|host|pvc)://')"
            ),
            message="unsupported uri protocol: use oss, s3, gcs, ollama, host or pvc",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
            doc=(
                "Protocols are case-insensitive, as in llmaz. pvc:// (a PersistentVolumeClaim in the "
                "workload's namespace) is an addition."
            ),
        ),
        CelRule(
            id="uri-oss-address",
            rule=(
                "!has(self.uri) || !self.uri.lowerAscii().startsWith('oss://') || "
                "self.uri.matches('^[^:]+://[^./]+[.][^/]+/.+$')"
            ),
            message="oss uri must be oss://<bucket>.<endpoint>/<path>",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
        ),
        CelRule(
            id="uri-bucket-path",
            rule=(
                "!has(self.uri) || !self.uri.lowerAscii().matches('^(s3|gcs)://') || "
                "self.uri.matches('^[^:]+://[^/]+/.+$')"
            ),
            message="s3 and gcs uris must be <protocol>://<bucket>/<path>",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
        ),
        CelRule(
            id="uri-host-absolute-path",
            rule=(
                "!has(self.uri) || !self.uri.lowerAscii().startsWith('host://') || "
                "self.uri.matches('^[^:]+:///.*$')"
            ),
            message="host uris must be host://<absolute path>, e.g. host:///models/qwen2",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
            doc="llmaz accepted any address and mounted a relative path; the path must be absolute.",
        ),
        CelRule(
            id="uri-pvc-claim",
            rule=(
                "!has(self.uri) || !self.uri.lowerAscii().startsWith('pvc://') || "
                "self.uri.matches('^[^:]+://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/.*)?$')"
            ),
            message="pvc uris must be pvc://<claim name>[/<path in the volume>]",
            value="self.uri",
            field_path=".uri",
            reason="FieldValueInvalid",
            doc="The claim is mounted read-only; the model path is the path inside the volume.",
        ),
    )

    model_hub: ModelHub | None = Field(default=None, description="Download from a model hub.")
    uri: str | None = Field(
        default=None,
        max_length=1024,
        description=(
            "<protocol>://<address>. oss://<bucket>.<endpoint>/<path>, s3://<bucket>/<path>, "
            "gcs://<bucket>/<path>, ollama://<model tag>, host://<absolute path>."
        ),
    )


class Flavor(ApiModel):
    """One accelerator option for serving a model. Flavors are listed in priority order."""

    name: Name = Field(description="Flavor name, referenced by claims.")
    limits: ResourceList | None = Field(
        default=None,
        description=(
            "Accelerators each serving pod needs, e.g. nvidia.com/gpu: 8. They set both requests and "
            "limits of the model-runner container."
        ),
    )
    node_selector: dict[str, ShortString] | None = Field(
        default=None, max_length=32, description="Node labels a pod of this flavor must run on."
    )
    params: dict[str, ShortString] | None = Field(
        default=None,
        max_length=32,
        description=(
            "Extra parameters: TP and PP (parallelism, usable as {{ .TP }} / {{ .PP }} in args), "
            "INSTANCE-TYPE (a hint for cluster autoscalers)."
        ),
    )


class InferenceConfig(ApiModel):
    """How to serve a model."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="flavor-names-unique",
            rule="!has(self.flavors) || self.flavors.all(f, self.flavors.exists_one(g, g.name == f.name))",
            message="flavor names must be unique",
            field_path=".flavors",
            reason="FieldValueInvalid",
            doc="Claims select flavors by name, so a duplicate would be ambiguous (not checked by llmaz).",
        ),
    )

    flavors: list[Flavor] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Fungible accelerator options, highest priority first (at most 8).",
    )


class ModelSpec(ApiModel):
    """What a model is and where its weights come from."""

    family_name: str = Field(
        min_length=1,
        max_length=63,
        pattern=LABEL_VALUE_PATTERN,
        description=(
            "Model family, e.g. llama3; copied into the llmaz.io/model-family-name label of the "
            "model and its pods, so it must be a label value: letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit."
        ),
    )
    source: ModelSource = Field(description="Where to load the model from.")
    inference_config: InferenceConfig | None = Field(
        default=None, description="How to serve the model: accelerator flavors."
    )
    owned_by: str = Field(
        default=DEFAULT_OWNED_BY, max_length=63, description="owned_by in the OpenAI /models answer."
    )
    created_at: datetime | None = Field(default=None, description="created in the OpenAI /models answer.")


class PreheatStatus(ApiModel):
    """Progress of preheating (label ``llmaz.io/model-preheat: "true"``): nodes whose shared cache
    the model is downloaded into."""

    nodes: int = Field(default=0, ge=0, description="Nodes selected by the model's flavors.")
    preheated: int = Field(default=0, ge=0, description="Nodes whose cache holds the complete model.")
    failed: int = Field(default=0, ge=0, description="Nodes whose preheat Job failed.")


class ModelStatus(ApiModel):
    """Observed state of an OpenModel."""

    conditions: list[Condition] | None = Field(
        default=None, max_length=16, description="Latest observations of the model."
    )
    preheat: PreheatStatus | None = Field(
        default=None, description="Preheat progress; set while the model is marked for preheating."
    )


class OpenModel(Resource):
    """A model that can be served: its source and the accelerators it may run on (cluster-scoped)."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (NAME_IS_DNS_LABEL,)

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "openmodels"
    short_names: ClassVar[tuple[str, ...]] = ("om",)
    scope: ClassVar[Scope] = "Cluster"
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        # llmaz's columns, in llmaz's order, then ours.
        PrinterColumn(name="OwnedBy", type="string", json_path=".spec.ownedBy"),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
        PrinterColumn(name="ModelHub", type="string", json_path=".spec.source.modelHub.name"),
        PrinterColumn(name="ModelID", type="string", json_path=".spec.source.modelHub.modelID"),
        PrinterColumn(name="URI", type="string", json_path=".spec.source.uri"),
        PrinterColumn(
            name="Preheated",
            type="string",
            json_path=".status.conditions[?(@.type=='Preheated')].reason",
            description="Preheat state (label llmaz.io/model-preheat).",
        ),
        PrinterColumn(
            name="InUse",
            type="string",
            json_path=f".status.conditions[?(@.type=='{CONDITION_IN_USE}')].reason",
            description="Referenced (by a Playground or Service, named in the condition) or Unused.",
        ),
    )

    spec: ModelSpec
    status: ModelStatus | None = None


class ModelRef(ApiModel):
    """One claimed model and its role."""

    name: Name = Field(description="Name of an OpenModel.")
    role: ModelRole = Field(
        default=ModelRole.MAIN, description="main (the served model) or draft (speculative decoding)."
    )


class ModelClaim(ApiModel):
    """Claims one model."""

    model_name: Name = Field(description="Name of an OpenModel.")
    inference_flavors: list[Name] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Flavors of the model to use, in priority order; all of the model's when unset.",
    )


class ModelClaims(ApiModel):
    """Claims several models: one main, optionally one draft for speculative decoding."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="models-at-most-one-main",
            rule="self.models.filter(m, !has(m.role) || m.role == 'main').size() <= 1",
            message="at most one model may have role main",
            field_path=".models",
            reason="FieldValueForbidden",
            doc=(
                "Fixes llmaz's Playground webhook, which counted models *named* main instead of models "
                "with role main, so several main models slipped through."
            ),
        ),
        CelRule(
            id="speculative-decoding-pair",
            rule=(
                "!self.models.exists(m, has(m.role) && m.role == 'draft') || "
                "(size(self.models) == 2 && self.models.exists(m, !has(m.role) || m.role == 'main'))"
            ),
            message="speculative decoding needs exactly two models: one main and one draft",
            field_path=".models",
            reason="FieldValueForbidden",
        ),
    )

    models: list[ModelRef] = Field(
        min_length=1,
        max_length=8,
        description="The claimed models: one main, plus one draft for speculative decoding.",
    )
    inference_flavors: list[Name] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Flavors of the main model to use, in priority order; all of the model's when unset.",
    )
