"""Shared per-node model cache: one volume for the loaders and engines of every pod on a node.

Without it each pod downloads its models into its own ``emptyDir``. With the operator setting
``modelLoader.sharedCache`` (a host path, or a PersistentVolumeClaim in the workload's namespace) the
loader init containers write into that volume instead, each model in a folder of its own per source
and revision (:func:`llmaz.loader.layout.cached_path`), and the engine container mounts that folder
read-only at the path it would have had without a cache, so ``{{ .ModelPath }}`` does not change.
The loader's lock and completion marker live next to the model in the cache, so replicas on one
node download once: the first takes the lock, the others wait, find the marker and exit.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator

from llmaz.api._base import ApiModel, Name

CACHE_VOLUME: Final = "model-cache"
"""Name of the pod volume holding the shared cache (reserved, like ``model-volume``)."""


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"{path!r} is not an absolute path (it must start with /)")
    return path


AbsolutePath = Annotated[
    str,
    StringConstraints(min_length=1, max_length=4096),
    AfterValidator(_absolute),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "^/"}),
]


class SharedCache(ApiModel):
    """Operator setting ``modelLoader.sharedCache``: where models are cached on each node.

    Set exactly one of ``hostPath`` and ``claimName``.
    """

    model_config = ConfigDict(
        **ApiModel.model_config,
        json_schema_extra={"oneOf": [{"required": ["hostPath"]}, {"required": ["claimName"]}]},
    )

    host_path: AbsolutePath | None = Field(
        default=None,
        description=(
            "Absolute directory on each node (created if missing), writable by the loader's user "
            "(uid 65532 in the llmaz image)."
        ),
    )
    claim_name: Name | None = Field(
        default=None,
        description=(
            "PersistentVolumeClaim in each workload's namespace; ReadWriteMany (or a node-local "
            "volume per node) so every pod of the node can mount it."
        ),
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SharedCache:
        if (self.host_path is None) == (self.claim_name is None):
            raise ValueError("set exactly one of hostPath and claimName")
        return self

    def volume(self) -> dict[str, Any]:
        """The pod volume of the cache."""
        if self.host_path is not None:
            return {"name": CACHE_VOLUME, "hostPath": {"path": self.host_path, "type": "DirectoryOrCreate"}}
        return {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": self.claim_name}}
