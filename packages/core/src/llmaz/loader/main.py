"""``llmaz load-model``: read the init container's environment, load, and explain failures.

Exit status 0 when the model is in place; 1 with a one-line cause in the termination log
(``/dev/termination-log`` unless ``LOADER_TERMINATION_LOG`` says otherwise), which Kubernetes shows
as the container's termination message and the operator reports as ``ModelLoadFailed``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from llmaz.loader import layout
from llmaz.loader.engine import LoadError, Options, Result, load
from llmaz.loader.redact import Redactor

log = logging.getLogger("llmaz.loader")

MAX_MESSAGE = 1024
"""Kubernetes keeps at most 4096 bytes of a termination message; one line is what a user reads."""


def _patterns(raw: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (raw or "").split(layout.PATTERN_SEPARATOR) if p.strip())


def _required(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise LoadError(f"{name} is not set: {what}")
    return value


def default_local_path(env: Mapping[str, str]) -> str | None:
    """Where the layout contract puts the model described by ``env`` (without ``MODEL_LOCAL_PATH``)."""
    kind = env.get(layout.ENV_SOURCE_TYPE, "").strip()
    if kind == layout.SOURCE_MODELHUB:
        model_id = _required(env, layout.ENV_MODEL_ID, "the hub model id, e.g. org/name")
        path = layout.hub_local_path(model_id, env.get(layout.ENV_FILENAME, "").strip() or None)
    elif kind == layout.SOURCE_OBJSTORE:
        path = layout.objstore_local_path(
            _required(env, layout.ENV_MODEL_PATH, "the object path of the model")
        )
    else:
        return None
    return layout.cached_path(path, env) if shared_cache(env) else path


def shared_cache(env: Mapping[str, str]) -> bool:
    """Whether the model volume is a cache shared with the other pods of the node."""
    value = env.get(layout.ENV_CACHE, "").strip()
    if value not in ("", layout.CACHE_SHARED):
        raise LoadError(f"{layout.ENV_CACHE}={value!r}: expected {layout.CACHE_SHARED!r} or nothing")
    return value == layout.CACHE_SHARED


def local_path(env: Mapping[str, str]) -> str:
    """``MODEL_LOCAL_PATH`` when given (the renderer always sets it), else the layout's default."""
    given = env.get(layout.ENV_LOCAL_PATH, "").strip()
    default = default_local_path(env)
    if given:
        return given
    if default is None:
        raise LoadError(f"{layout.ENV_LOCAL_PATH} is not set: the path to check")
    return default


def run_from_env(env: Mapping[str, str]) -> Result | None:
    """Load the model the environment describes; ``None`` when there is nothing to download."""
    kind = env.get(layout.ENV_SOURCE_TYPE, "").strip()
    options = Options.from_env(dict(env))
    if shared_cache(env):
        log.info("the model volume is a cache shared by the pods of this node; each model is fetched once")
    if kind == layout.SOURCE_MODELHUB:
        model_id = _required(env, layout.ENV_MODEL_ID, "the hub model id, e.g. org/name")
        hub = env.get(layout.ENV_HUB_NAME, "").strip() or layout.HUB_HUGGINGFACE
        revision = env.get(layout.ENV_REVISION, "").strip() or None
        filename = env.get(layout.ENV_FILENAME, "").strip() or None
        local = local_path(env)
        allow, ignore = (
            _patterns(env.get(layout.ENV_ALLOW_PATTERNS)),
            _patterns(env.get(layout.ENV_IGNORE_PATTERNS)),
        )
        if hub == layout.HUB_HUGGINGFACE:
            from llmaz.loader.huggingface import HuggingFaceSource

            token = layout.credential(env, layout.ENV_HF_TOKEN, layout.ENV_HF_TOKEN_LEGACY)
            source = HuggingFaceSource(
                model_id,
                revision=layout.hub_revision(hub, revision),
                filename=filename,
                allow_patterns=allow,
                ignore_patterns=ignore,
                token=token,
                endpoint=env.get("HF_ENDPOINT") or None,
            )
            return load(source, local, options)
        if hub == layout.HUB_MODELSCOPE:
            if filename:
                raise LoadError(f"{layout.ENV_FILENAME} is not supported for ModelScope models")
            from llmaz.loader.modelscope import ModelScopeSource

            return ModelScopeSource(model_id, layout.hub_revision(hub, revision), allow, ignore).load(
                local, options
            )
        raise LoadError(
            f"{layout.ENV_HUB_NAME}={hub!r}: unknown model hub; expected "
            f"{layout.HUB_HUGGINGFACE} or {layout.HUB_MODELSCOPE}"
        )
    if kind == layout.SOURCE_OBJSTORE:
        from llmaz.loader.objstore import ObjectStoreSource

        obj = ObjectStoreSource(
            provider=_required(env, layout.ENV_PROVIDER, "S3, GCS or OSS"),
            bucket=env.get(layout.ENV_BUCKET, "").strip(),
            path=env.get(layout.ENV_MODEL_PATH, ""),
            endpoint=env.get(layout.ENV_ENDPOINT, "").strip() or None,
            env=env,
        )
        return load(obj, local_path(env), options)
    if kind == layout.SOURCE_PATH:
        from llmaz.loader.local import validate_path

        validate_path(env.get(layout.ENV_LOCAL_PATH, "").strip())
        return None
    if kind == layout.SOURCE_OLLAMA:
        from llmaz.loader.local import ollama_noop

        ollama_noop(env.get(layout.ENV_MODEL_ID, ""))
        return None
    raise LoadError(
        f"{layout.ENV_SOURCE_TYPE}={kind!r}: unknown model source type; expected one of "
        f"{layout.SOURCE_MODELHUB}, {layout.SOURCE_OBJSTORE}, {layout.SOURCE_PATH}, {layout.SOURCE_OLLAMA}"
    )


def one_line(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def write_termination_message(path: str, message: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(message + "\n")
    except OSError as err:
        log.warning("cannot write the termination message to %s: %s", path, err.strerror)


def main(env: Mapping[str, str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    env = os.environ if env is None else env
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout
        )
    termination_log = env.get(layout.ENV_TERMINATION_LOG) or layout.DEFAULT_TERMINATION_LOG
    redact = Redactor.from_env(env)  # no credential value reaches a log line or the Playground
    with redact.installed():
        try:
            run_from_env(env)
        except LoadError as err:
            message = str(err)
        except (SystemExit, GeneratorExit):
            raise
        except KeyboardInterrupt:
            message = "interrupted"
        except ModuleNotFoundError as err:  # an install without the loader's dependencies
            message = (
                f"llmaz load-model needs the 'loader' extra ({err.name or err} is missing): "
                "pip install 'llmaz[loader]', or use the llmaz image"
            )
        # A bug, not a user error: keep the type so the report is useful. BaseException, because a
        # panic in a Rust extension (obstore's pyo3 PanicException) does not derive from Exception.
        except BaseException as err:
            log.exception("model loader crashed")
            message = f"model loader crashed: {type(err).__name__}: {err}"
        else:
            return 0
        message = one_line(redact(message))  # masked before whitespace is folded: multi-line values
        log.error("%s", message)
        write_termination_message(termination_log, message)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
