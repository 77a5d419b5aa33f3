"""Fixtures of the loader tests: the Hub stand-in and an environment like the renderer's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from standins import HubStandIn, Repo, generate_model

REPO = "stand-in/tiny-llama"


@pytest.fixture
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as server:
        server.repos[REPO] = Repo(files=generate_model())
        yield server


@pytest.fixture
def models(tmp_path: Path) -> Path:
    """The model volume (``/workspace/models`` in a pod)."""
    path = tmp_path / "models"
    path.mkdir()
    return path


def hub_env(hub: HubStandIn, models: Path, repo: str = REPO, **extra: str) -> dict[str, str]:
    """The init container environment the renderer writes for a Hugging Face model, rebased on tmp."""
    env = {
        "MODEL_SOURCE_TYPE": "modelhub",
        "MODEL_ID": repo,
        "MODEL_HUB_NAME": "Huggingface",
        "REVISION": "main",
        "MODEL_LOCAL_PATH": str(models / f"models--{repo.replace('/', '--')}"),
        "HF_ENDPOINT": hub.url,
        "LOADER_BACKOFF_SECONDS": "0.01",
        "LOADER_TERMINATION_LOG": str(models.parent / "termination-log"),
    }
    env.update(extra)
    return env


def termination_message(models: Path) -> str:
    return (models.parent / "termination-log").read_text().strip()
