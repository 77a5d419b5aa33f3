"""The layout contract between the renderer and the model loader.

The renderer decides, per claimed model, which environment the ``model-loader`` init container gets
and which path the engine is pointed at (``{{ .ModelPath }}``); the loader reads that environment and
writes the weights exactly there. Both sides import this module, so they cannot drift apart (in
llmaz the Go renderer treated only ``.gguf`` paths as single files while its Python loader treated
any name with a dot as one, and the runner was pointed at a folder that never existed).

Pure: standard library only, importable by ``llmaz.render`` without the ``loader`` extra.

Layout of the model volume (mounted at :data:`MODEL_DIR`)::

    /workspace/models/
      models--<org>--<repo>/          a hub model, or models--<last segment> of an object-store folder
      <file>.gguf                     a single file (hub ``filename`` or an object-store ``.gguf`` path)
      .llmaz/                         loader state, never read by an engine
        <name>.lock                   held while a loader writes <name> (shared per-node caches)
        <name>.complete.json          completion marker: written atomically, keyed by source + revision
        partial/<name>/<relative>     bytes being downloaded (resumed on retry or pod restart)
        partial/<name>.identity/<relative>  the ETag or digest of the version those bytes are from
        partial/<name>.verified/<relative>  digest of a file verified and in place (until the marker)

With a shared per-node cache (operator setting ``modelLoader.sharedCache``) the volume is the cache
and every model gets a folder of its own per source and revision, so two models, or two revisions
of one, never share files, and the lock is per model and revision::

    /workspace/models/                          the cache (host path or PVC)
      <source key>/                             e.g. Huggingface--Qwen-Qwen2-0.5B--main--1a2b3c4d5e6f
        models--<org>--<repo>/ or <file>.gguf   what the per-pod volume would hold
        .llmaz/                                 that model's lock, marker and partial files

The loader writes to ``<source key>/<name>``; the engine container mounts that sub path at the usual
``/workspace/models/<name>``, so the path the engine is told to load is the same with and without a
cache.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Final

MODEL_DIR: Final = "/workspace/models"
"""Where loaders write and the runner reads downloaded weights (the model volume's mount point)."""

STATE_DIR_NAME: Final = ".llmaz"
"""Loader bookkeeping under the model volume; engines never look inside."""

SINGLE_FILE_SUFFIXES: Final = (".gguf",)
"""An object-store path whose last segment ends with one of these is one file, else a folder."""

# --- the loader's image --------------------------------------------------------------------------

IMAGE_REPOSITORY: Final = "ghcr.io/inftyai/llmaz-python"
"""This project's image; ``llmaz load-model`` is its second entry point (the first is the operator)."""


LOADER_COMMAND: Final = ("llmaz", "load-model")
"""The init container's command: an override image must provide it too (llmaz's ``model-loader``
images do not; they run ``python main.py``)."""


def default_loader_image(version: str) -> str:
    """The loader image of one llmaz release (the operator config may override it)."""
    return f"{IMAGE_REPOSITORY}:v{version}"


# --- Secrets the renderer references and the loader names in its error messages -----------------

HUB_SECRET: Final = "modelhub-secret"
AWS_SECRET: Final = "aws-access-secret"
OSS_SECRET: Final = "oss-access-secret"

# Credential variables (from those Secrets; the Secret key has the same name as the variable).
ENV_HF_TOKEN: Final = "HF_TOKEN"
ENV_HF_TOKEN_LEGACY: Final = "HUGGING_FACE_HUB_TOKEN"
ENV_AWS_KEY_ID: Final = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_KEY: Final = "AWS_SECRET_ACCESS_KEY"
ENV_OSS_KEY_ID: Final = "OSS_ACCESS_KEY_ID"
ENV_OSS_SECRET_KEY: Final = "OSS_ACCESS_KEY_SECRET"
ENV_AWS_SESSION_TOKEN: Final = "AWS_SESSION_TOKEN"
CREDENTIAL_ENV: Final = (
    ENV_HF_TOKEN,
    ENV_HF_TOKEN_LEGACY,
    ENV_AWS_KEY_ID,
    ENV_AWS_SECRET_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_OSS_KEY_ID,
    ENV_OSS_SECRET_KEY,
)
"""Every variable holding a credential: the loader strips their values when it reads them (a Secret
made with ``--from-file`` often ends in a newline) and never writes them into a message."""


def credential(env: Mapping[str, str], *names: str) -> str | None:
    """The first of ``names`` set to something other than whitespace, stripped; else ``None``."""
    for name in names:
        value = (env.get(name) or "").strip()
        if value:
            return value
    return None


# --- the environment of the init container --------------------------------------------------------

ENV_SOURCE_TYPE: Final = "MODEL_SOURCE_TYPE"
SOURCE_MODELHUB: Final = "modelhub"
SOURCE_OBJSTORE: Final = "objstore"
SOURCE_PATH: Final = "path"
"""A PVC or host path: validated (exists, readable, not empty), never copied."""
SOURCE_OLLAMA: Final = "ollama"
"""ollama pulls the model itself; the loader has nothing to do."""

ENV_MODEL_ID: Final = "MODEL_ID"
ENV_HUB_NAME: Final = "MODEL_HUB_NAME"
ENV_REVISION: Final = "REVISION"
ENV_FILENAME: Final = "MODEL_FILENAME"
ENV_ALLOW_PATTERNS: Final = "MODEL_ALLOW_PATTERNS"
ENV_IGNORE_PATTERNS: Final = "MODEL_IGNORE_PATTERNS"
ENV_PROVIDER: Final = "PROVIDER"
ENV_ENDPOINT: Final = "ENDPOINT"
ENV_BUCKET: Final = "BUCKET"
ENV_MODEL_PATH: Final = "MODEL_PATH"
ENV_LOCAL_PATH: Final = "MODEL_LOCAL_PATH"
"""The one path both sides agree on: where the loader writes and what the engine reads."""
ENV_CACHE: Final = "MODEL_CACHE"
"""``shared`` when the model volume is a cache shared by the pods of a node (see :func:`cached_path`)."""
CACHE_SHARED: Final = "shared"

HUB_HUGGINGFACE: Final = "Huggingface"
HUB_MODELSCOPE: Final = "ModelScope"
PATTERN_SEPARATOR: Final = ","

DEFAULT_BRANCHES: Final = {HUB_HUGGINGFACE: "main", HUB_MODELSCOPE: "master"}
"""Each hub's default branch (what its client asks for without a revision)."""


def hub_revision(hub: str, revision: str | None) -> str:
    """The revision to ask ``hub`` for. ``main``, the API's default ``revision``, and no revision
    both name the hub's default branch: ``master`` on ModelScope, whose repositories have no
    ``main`` (llmaz (Go) never passed a revision to ModelScope, so its default branch was used)."""
    default = DEFAULT_BRANCHES.get(hub, "main")
    if not revision or revision == "main":
        return default
    return revision


# Loader tuning: optional, read only by the loader (the renderer never sets them).
ENV_PARALLEL: Final = "LOADER_PARALLEL_FILES"
ENV_RETRIES: Final = "LOADER_RETRIES"
ENV_BACKOFF: Final = "LOADER_BACKOFF_SECONDS"
ENV_PROGRESS_SECONDS: Final = "LOADER_PROGRESS_SECONDS"
ENV_TERMINATION_LOG: Final = "LOADER_TERMINATION_LOG"
ENV_LOCK_TIMEOUT: Final = "LOADER_LOCK_TIMEOUT_SECONDS"
ENV_VERIFY: Final = "LOADER_VERIFY"
"""``checksum`` (default: sizes and every digest the source publishes) or ``size`` (sizes only)."""
DEFAULT_TERMINATION_LOG: Final = "/dev/termination-log"


# --- paths -----------------------------------------------------------------------------------------


def hub_local_path(model_id: str, filename: str | None = None, model_dir: str = MODEL_DIR) -> str:
    """Where a Hugging Face or ModelScope model lands: one file, or the whole repository."""
    if filename:
        return f"{model_dir}/{filename}"
    return f"{model_dir}/models--{model_id.replace('/', '--')}"


def is_single_file(object_path: str) -> bool:
    """Whether an object-store path names one file (else it is a folder prefix)."""
    return last_segment(object_path).lower().endswith(SINGLE_FILE_SUFFIXES)


def last_segment(object_path: str) -> str:
    return object_path.rstrip("/").rsplit("/", 1)[-1]


def objstore_local_path(object_path: str, model_dir: str = MODEL_DIR) -> str:
    """Where an S3, GCS or OSS model lands: ``<file>.gguf`` or ``models--<last segment>``."""
    last = last_segment(object_path)
    if is_single_file(object_path):
        return f"{model_dir}/{last}"
    return f"{model_dir}/models--{last}"


def state_dir(local_path: str) -> PurePosixPath:
    """The loader's bookkeeping folder on the same volume as ``local_path``."""
    return PurePosixPath(local_path).parent / STATE_DIR_NAME


def lock_path(local_path: str) -> PurePosixPath:
    return state_dir(local_path) / f"{PurePosixPath(local_path).name}.lock"


def marker_path(local_path: str) -> PurePosixPath:
    return state_dir(local_path) / f"{PurePosixPath(local_path).name}.complete.json"


def partial_dir(local_path: str) -> PurePosixPath:
    return state_dir(local_path) / "partial" / PurePosixPath(local_path).name


# Loader variables that say which bytes a model folder holds: one cache folder per combination.
_CACHE_IDENTITY: Final = (
    ENV_HUB_NAME,
    ENV_MODEL_ID,
    ENV_REVISION,
    ENV_FILENAME,
    ENV_ALLOW_PATTERNS,
    ENV_IGNORE_PATTERNS,
    ENV_PROVIDER,
    ENV_ENDPOINT,
    ENV_BUCKET,
    ENV_MODEL_PATH,
)


def cached_path(local_path: str, loader_env: Mapping[str, str], model_dir: str = MODEL_DIR) -> str:
    """Where the loader writes ``local_path`` (a path under ``model_dir``) in a shared cache.

    The folder is named after the loader variables that identify the bytes (source, repository or
    object path, revision, file name, patterns), so both sides derive it from the same environment.
    """
    prefix = model_dir.rstrip("/") + "/"
    if not local_path.startswith(prefix):
        raise ValueError(f"{local_path!r} is not under the model folder {model_dir!r}")
    key = source_key(*(loader_env.get(name, "").strip() for name in _CACHE_IDENTITY))
    return f"{prefix}{key}/{local_path[len(prefix) :]}"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def source_key(*parts: str) -> str:
    """A stable, readable key for one source at one revision (kept in the completion marker)."""
    readable = _UNSAFE.sub("-", "--".join(p for p in parts if p)).strip("-")[:120]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
    return f"{readable}--{digest}"
