"""ModelScope: the lock, marker and failure line llmaz adds around ``modelscope.snapshot_download``.

The download itself is ``modelscope``'s; no ModelScope hub stand-in exists here (its client speaks a
large private API), so ``snapshot_download`` is replaced by a STAND-IN that writes files like it
does. What is tested is llmaz's part: arguments passed through, completion marker, skip on
restart, and the one-line cause.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import modelscope
import pytest

from llmaz.loader import layout
from llmaz.loader.main import main


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def standin_snapshot_download(model_id: str, **kwargs: Any) -> str:
        seen.append({"model_id": model_id, **kwargs})
        if model_id == "org/missing":
            raise ValueError("The request model: org/missing does not exist!\nmore detail")
        target = Path(kwargs["local_dir"])
        target.mkdir(parents=True, exist_ok=True)
        (target / "config.json").write_text("{}")
        return str(target)

    monkeypatch.setattr(modelscope, "snapshot_download", standin_snapshot_download)
    return seen


def _env(models: Path, model_id: str = "AI-ModelScope/opt-125", **extra: str) -> dict[str, str]:
    return {
        "MODEL_SOURCE_TYPE": "modelhub",
        "MODEL_HUB_NAME": "ModelScope",
        "MODEL_ID": model_id,
        "REVISION": "v1.0",
        "MODEL_LOCAL_PATH": layout.hub_local_path(model_id, model_dir=str(models)),
        "MODEL_IGNORE_PATTERNS": "*.bin",
        "LOADER_TERMINATION_LOG": str(models.parent / "termination-log"),
        **extra,
    }


def test_download_marker_and_skip(calls: list[dict[str, Any]], models: Path) -> None:
    env = _env(models)
    assert main(env) == 0
    assert calls == [
        {
            "model_id": "AI-ModelScope/opt-125",
            "revision": "v1.0",
            "local_dir": env["MODEL_LOCAL_PATH"],
            "allow_patterns": None,
            "ignore_patterns": ["*.bin"],
        }
    ]
    assert Path(layout.marker_path(env["MODEL_LOCAL_PATH"])).exists()
    assert main(env) == 0
    assert len(calls) == 1


def test_failure_is_one_line(calls: list[dict[str, Any]], models: Path) -> None:
    assert main(_env(models, "org/missing")) == 1
    assert (models.parent / "termination-log").read_text().strip() == (
        "ModelScope download of org/missing@v1.0 failed: The request model: org/missing does not exist!"
    )


def test_filename_is_refused_for_modelscope(calls: list[dict[str, Any]], models: Path) -> None:
    assert main(_env(models, MODEL_FILENAME="x.gguf")) == 1
    assert calls == []
    assert (
        "MODEL_FILENAME is not supported for ModelScope models"
        in (models.parent / "termination-log").read_text()
    )


@pytest.mark.parametrize("given", ["main", ""])
def test_the_default_revision_asks_modelscope_for_its_default_branch(
    calls: list[dict[str, Any]], models: Path, given: str
) -> None:
    """``main`` is the API's default revision (the CRD fills it in); ModelScope repositories have
    ``master`` as their default branch and no ``main``, so both mean ``master`` there."""
    assert main(_env(models, REVISION=given)) == 0
    assert calls[0]["revision"] == "master"


def test_a_named_revision_is_passed_as_given(calls: list[dict[str, Any]], models: Path) -> None:
    assert main(_env(models, REVISION="release-2")) == 0
    assert calls[0]["revision"] == "release-2"
