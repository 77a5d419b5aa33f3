"""``llmaz.io/v1alpha1``: OpenModel and the model-claim types shared by Playground and Service."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from llmaz.api._base import ApiModel, Condition, PrinterColumn, Resource, Scope
from llmaz.api.k8s import ResourceList

GROUP = "llmaz.io"
VERSION = "v1alpha1"

# Labels and annotations with a meaning to llmaz.
LABEL_MODEL_NAME = "llmaz.io/model-name"
LABEL_MODEL_FAMILY_NAME = "llmaz.io/model-family-name"
ANNOTATION_MODEL_PREHEAT = "llmaz.io/model-preheat"

HUGGINGFACE = "Huggingface"
MODELSCOPE = "ModelScope"
DEFAULT_OWNED_BY = "llmaz"
MAX_FLAVORS = 8


class ModelHubName(StrEnum):
    HUGGINGFACE = HUGGINGFACE
    MODELSCOPE = MODELSCOPE


class ModelRole(StrEnum):
    MAIN = "main"
    DRAFT = "draft"


class ModelHub(ApiModel):
    """A model registry to download from (Hugging Face or ModelScope)."""

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
        default="main", max_length=256, description="Git revision: a branch, a tag or a commit hash."
    )
    allow_patterns: list[str] | None = Field(
        default=None, max_length=64, description="Only files matching at least one glob are downloaded."
    )
    ignore_patterns: list[str] | None = Field(
        default=None, max_length=64, description="Files matching any of these globs are not downloaded."
    )


class ModelSource(ApiModel):
    """Where the weights come from: a model hub, or a URI (``oss://``, ``s3://``, ``gcs://``,
    ``ollama://``, ``host://``). Exactly one of the two must be set."""

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

    name: str = Field(min_length=1, max_length=63, description="Flavor name, referenced by claims.")
    limits: ResourceList | None = Field(
        default=None,
        description=(
            "Accelerators each serving pod needs, e.g. nvidia.com/gpu: 8. They set both requests and "
            "limits of the model-runner container."
        ),
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="Node labels a pod of this flavor must run on."
    )
    params: dict[str, str] | None = Field(
        default=None,
        description=(
            "Extra parameters: TP and PP (parallelism, usable as {{ .TP }} / {{ .PP }} in args), "
            "INSTANCE-TYPE (a hint for cluster autoscalers)."
        ),
    )


class InferenceConfig(ApiModel):
    flavors: list[Flavor] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Fungible accelerator options, highest priority first (at most 8).",
    )


class ModelSpec(ApiModel):
    family_name: str = Field(
        min_length=1, max_length=63, description="Model family, e.g. llama3; copied into a pod label."
    )
    source: ModelSource = Field(description="Where to load the model from.")
    inference_config: InferenceConfig | None = Field(
        default=None, description="How to serve the model: accelerator flavors."
    )
    owned_by: str = Field(
        default=DEFAULT_OWNED_BY, max_length=63, description="owned_by in the OpenAI /models answer."
    )
    created_at: datetime | None = Field(default=None, description="created in the OpenAI /models answer.")


class ModelStatus(ApiModel):
    conditions: list[Condition] | None = None


class OpenModel(Resource):
    """A model that can be served: its source and the accelerators it may run on (cluster-scoped)."""

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "openmodels"
    short_names: ClassVar[tuple[str, ...]] = ("om",)
    scope: ClassVar[Scope] = "Cluster"
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn(name="OwnedBy", type="string", json_path=".spec.ownedBy"),
        PrinterColumn(name="ModelHub", type="string", json_path=".spec.source.modelHub.name"),
        PrinterColumn(name="ModelID", type="string", json_path=".spec.source.modelHub.modelID"),
        PrinterColumn(name="URI", type="string", json_path=".spec.source.uri"),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )

    spec: ModelSpec
    status: ModelStatus | None = None


class ModelRef(ApiModel):
    name: str = Field(min_length=1, max_length=63, description="Name of an OpenModel.")
    role: ModelRole = Field(
        default=ModelRole.MAIN, description="main (the served model) or draft (speculative decoding)."
    )


class ModelClaim(ApiModel):
    """Claims one model."""

    model_name: str = Field(min_length=1, max_length=63, description="Name of an OpenModel.")
    inference_flavors: list[str] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Flavors of the model to use, in priority order; all of the model's when unset.",
    )


class ModelClaims(ApiModel):
    """Claims several models: one main, optionally one draft for speculative decoding."""

    models: list[ModelRef] = Field(min_length=1, max_length=8)
    inference_flavors: list[str] | None = Field(default=None, max_length=MAX_FLAVORS)
