"""Model sources: where the runner finds each model, and what loads it there.

Supported sources (``OpenModel.spec.source``):

=============  ===================================  =======  =========================================
source         spec                                 loader   the runner sees (``{{ .ModelPath }}``)
=============  ===================================  =======  =========================================
Hugging Face   ``modelHub`` (name Huggingface)      yes      ``/workspace/models/models--<org>--<repo>``
                                                             or ``/workspace/models/<filename>``
ModelScope     ``modelHub`` (name ModelScope)       yes      same layout
OSS            ``oss://<bucket>.<endpoint>/<path>``  yes      ``/workspace/models/<file>.gguf`` or
                                                             ``/workspace/models/models--<last segment>``
S3             ``s3://<bucket>/<path>``             yes      same layout
GCS            ``gcs://<bucket>/<path>``            yes      same layout
host path      ``host://<absolute path>``           no       the path (hostPath, read-only)
PVC            ``pvc://<claim>[/<path>]``           no       ``/workspace/models/<volume>/<path>`` (read-only)
ollama         ``ollama://<tag>``                   no       the tag (ollama pulls it itself)
=============  ===================================  =======  =========================================

With ``llmaz.io/skip-model-loader: "true"`` hub models pass their model id and object-store models
their URI to the engine, which loads them itself with the credentials injected into the runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from llmaz.api import OpenModel
from llmaz.loader import layout
from llmaz.loader.layout import AWS_SECRET, HUB_SECRET, MODEL_DIR, OSS_SECRET
from llmaz.render.errors import InvalidModelSource

__all__ = ["AWS_SECRET", "HUB_SECRET", "MODEL_DIR", "OSS_SECRET", "ResolvedSource", "resolve_source"]

SourceProtocol = Literal["huggingface", "modelscope", "oss", "s3", "gcs", "host", "pvc", "ollama"]
_URI_PROTOCOLS: dict[str, SourceProtocol] = {
    "OSS": "oss",
    "S3": "s3",
    "GCS": "gcs",
    "HOST": "host",
    "PVC": "pvc",
    "OLLAMA": "ollama",
}


def env_value(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def env_secret(name: str, secret: str, key: str) -> dict[str, Any]:
    """An env var read from a Secret key; the only way credentials are ever passed."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": True}}}


@dataclass(frozen=True)
class ResolvedSource:
    """One claimed model, resolved: what it is, where it goes and how it is loaded."""

    index: int
    """Position in the claimed models, main model first (0)."""
    model: OpenModel
    protocol: SourceProtocol
    uri: str | None
    bucket: str | None = None
    endpoint: str | None = None
    path: str | None = None
    """Object path (object stores), absolute path (host), sub path (pvc) or tag (ollama)."""
    claim: str | None = None

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def volume_name(self) -> str:
        return "model-volume" if self.index == 0 else f"model-volume-{self.index}"

    @property
    def loader_name(self) -> str:
        return "model-loader" if self.index == 0 else f"model-loader-{self.index}"

    @property
    def is_hub(self) -> bool:
        return self.protocol in ("huggingface", "modelscope")

    @property
    def is_object_store(self) -> bool:
        return self.protocol in ("oss", "s3", "gcs")

    def needs_loader(self, skip_loader: bool) -> bool:
        return not skip_loader and (self.is_hub or self.is_object_store)

    def local_path(self) -> str:
        """Path of the weights once a loader has fetched them."""
        # The loader reads the same rule from llmaz.loader.layout, so the two cannot disagree.
        if self.is_hub:
            hub = self.model.spec.source.model_hub
            assert hub is not None
            return layout.hub_local_path(hub.model_id, hub.filename)
        return layout.objstore_local_path(self.path or "")

    def cached_path(self) -> str:
        """Where the loader writes the weights in a shared cache (see :mod:`llmaz.render.cache`)."""
        return layout.cached_path(self.local_path(), self._identity())

    def _identity(self) -> dict[str, str]:
        return {e["name"]: e["value"] for e in self.loader_inputs() if "value" in e}

    def model_path(self, skip_loader: bool) -> str:
        """``{{ .ModelPath }}``: where (or what) the engine loads."""
        if self.protocol == "host":
            return self.path or ""
        if self.protocol == "pvc":
            base = f"{MODEL_DIR}/{self.volume_name}"
            return f"{base}/{self.path}" if self.path else base
        if self.protocol == "ollama":
            return self.path or ""
        if skip_loader:
            if self.is_hub:
                hub = self.model.spec.source.model_hub
                assert hub is not None
                return hub.model_id
            return self.uri or ""
        return self.local_path()

    def model_name(self) -> str:
        """``{{ .ModelName }}``: the OpenModel name, or the tag for ollama."""
        if self.protocol == "ollama":
            return self.path or ""
        return self.name

    # --- credentials and loader inputs -------------------------------------------------------

    def credential_envs(self) -> list[dict[str, Any]]:
        """Secret references the loader (or, without a loader, the engine) needs."""
        if self.is_hub:
            return [
                env_secret(layout.ENV_HF_TOKEN_LEGACY, HUB_SECRET, layout.ENV_HF_TOKEN),
                env_secret(layout.ENV_HF_TOKEN, HUB_SECRET, layout.ENV_HF_TOKEN),
            ]
        if self.protocol in ("s3", "gcs"):
            # GCS is read through its S3-compatible API with HMAC keys.
            return [
                env_secret(layout.ENV_AWS_KEY_ID, AWS_SECRET, layout.ENV_AWS_KEY_ID),
                env_secret(layout.ENV_AWS_SECRET_KEY, AWS_SECRET, layout.ENV_AWS_SECRET_KEY),
            ]
        if self.protocol == "oss":
            return [
                env_secret(layout.ENV_OSS_KEY_ID, OSS_SECRET, layout.ENV_OSS_KEY_ID),
                env_secret(layout.ENV_OSS_SECRET_KEY, OSS_SECRET, layout.ENV_OSS_SECRET_KEY),
            ]
        return []

    def loader_inputs(self, shared_cache: bool = False) -> list[dict[str, Any]]:
        """The loader's environment (without credentials); ``shared_cache``: the volume is the
        node's cache, so the loader writes to :meth:`cached_path`."""
        envs: list[dict[str, Any]] = []
        if self.is_hub:
            hub = self.model.spec.source.model_hub
            assert hub is not None
            envs += [
                env_value(layout.ENV_SOURCE_TYPE, layout.SOURCE_MODELHUB),
                env_value(layout.ENV_MODEL_ID, hub.model_id),
                env_value(layout.ENV_HUB_NAME, str(hub.name)),
                env_value(layout.ENV_REVISION, layout.hub_revision(str(hub.name), hub.revision)),
            ]
            if hub.filename:
                envs.append(env_value(layout.ENV_FILENAME, hub.filename))
            if hub.allow_patterns:
                envs.append(
                    env_value(layout.ENV_ALLOW_PATTERNS, layout.PATTERN_SEPARATOR.join(hub.allow_patterns))
                )
            if hub.ignore_patterns:
                envs.append(
                    env_value(layout.ENV_IGNORE_PATTERNS, layout.PATTERN_SEPARATOR.join(hub.ignore_patterns))
                )
        else:
            envs += [
                env_value(layout.ENV_SOURCE_TYPE, layout.SOURCE_OBJSTORE),
                env_value(layout.ENV_PROVIDER, self.protocol.upper()),
            ]
            if self.endpoint:
                envs.append(env_value(layout.ENV_ENDPOINT, self.endpoint))
            envs += [
                env_value(layout.ENV_BUCKET, self.bucket or ""),
                env_value(layout.ENV_MODEL_PATH, self.path or ""),
            ]
        if shared_cache:
            envs.append(env_value(layout.ENV_CACHE, layout.CACHE_SHARED))
            envs.append(
                env_value(layout.ENV_LOCAL_PATH, layout.cached_path(self.local_path(), self._identity()))
            )
        else:
            envs.append(env_value(layout.ENV_LOCAL_PATH, self.local_path()))
        return envs


def resolve_source(model: OpenModel, index: int, *, field: str) -> ResolvedSource:
    """Classify an OpenModel's source; :class:`InvalidModelSource` when it cannot be used."""
    source = model.spec.source
    if source.model_hub is not None:
        protocol: SourceProtocol = (
            "modelscope" if str(source.model_hub.name) == "ModelScope" else "huggingface"
        )
        return ResolvedSource(index=index, model=model, protocol=protocol, uri=None)
    uri = source.uri
    src_field = f"OpenModel {model.name!r} spec.source"
    if not uri:
        raise InvalidModelSource(field, f"{src_field}: neither modelHub nor uri is set")
    scheme, sep, address = uri.partition("://")
    proto = _URI_PROTOCOLS.get(scheme.upper())
    if not sep or proto is None:
        raise InvalidModelSource(
            field,
            f"{src_field}.uri {uri!r}: unknown protocol; use one of "
            + ", ".join(f"{p}://" for p in _URI_PROTOCOLS.values()),
        )
    if proto == "host":
        if not address.startswith("/"):
            raise InvalidModelSource(field, f"{src_field}.uri {uri!r}: host:// needs an absolute path")
        return ResolvedSource(
            index=index, model=model, protocol=proto, uri=uri, path=address.rstrip("/") or "/"
        )
    if proto == "ollama":
        if not address:
            raise InvalidModelSource(field, f"{src_field}.uri {uri!r}: ollama:// needs a model tag")
        return ResolvedSource(index=index, model=model, protocol=proto, uri=uri, path=address)
    host, _, path = address.partition("/")
    path = path.strip("/")
    if proto == "pvc":
        if not host:
            raise InvalidModelSource(field, f"{src_field}.uri {uri!r}: pvc:// needs a claim name")
        return ResolvedSource(
            index=index, model=model, protocol=proto, uri=uri, claim=host, path=path or None
        )
    if not host or not path:
        raise InvalidModelSource(
            field, f"{src_field}.uri {uri!r}: expected {proto}://<bucket>/<path to the model>"
        )
    if proto == "oss":
        bucket, dot, endpoint = host.partition(".")
        if not dot or not bucket or not endpoint:
            raise InvalidModelSource(
                field, f"{src_field}.uri {uri!r}: expected oss://<bucket>.<endpoint>/<path to the model>"
            )
        return ResolvedSource(
            index=index, model=model, protocol=proto, uri=uri, bucket=bucket, endpoint=endpoint, path=path
        )
    return ResolvedSource(index=index, model=model, protocol=proto, uri=uri, bucket=host, path=path)
