"""PVC and host paths (validated, never copied) and ollama (the engine pulls; nothing to do)."""

from __future__ import annotations

import logging
import os

from llmaz.loader.engine import LoadError

log = logging.getLogger("llmaz.loader")


def validate_path(path: str) -> None:
    """Fail early, with the path in the message, when a mounted model is missing or unreadable."""
    if not path:
        raise LoadError("MODEL_LOCAL_PATH is empty: the mounted path of the model to check")
    if not os.path.exists(path):
        raise LoadError(f"{path}: model path does not exist (is the PVC or host path mounted and populated?)")
    if not os.access(path, os.R_OK):
        raise LoadError(f"{path}: model path is not readable by uid {os.getuid()}")
    if os.path.isdir(path):
        try:
            entries = os.listdir(path)
        except OSError as err:
            raise LoadError(f"{path}: cannot list the model folder: {err.strerror}") from err
        if not entries:
            raise LoadError(f"{path}: model folder is empty")
        log.info("model folder %s is present (%d entries); nothing to copy", path, len(entries))
    else:
        log.info("model file %s is present (%d bytes); nothing to copy", path, os.path.getsize(path))


def ollama_noop(tag: str) -> None:
    log.info("ollama model %s is pulled by the ollama engine itself; nothing to do", tag or "(unnamed)")
