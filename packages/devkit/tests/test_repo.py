"""Where the devkit finds the repository's tools: the uv that tests build wheels and environments with."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmaz_devkit.repo import UvNotFound, uv_binary


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_uv_on_path_first_then_the_bootstrapped_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = _executable(tmp_path / "path" / "uv")
    boot = _executable(tmp_path / "boot" / "bin" / "uv")
    home = tmp_path / "home"
    cached = _executable(home / ".cache" / "llmaz" / "bootstrap-uv-0.13.8" / "bin" / "uv")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("LLMAZ_BOOTSTRAP_DIR", str(boot.parent.parent))
    assert uv_binary() == str(on_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert uv_binary() == str(boot)  # where tools/bootstrap.sh was told to install it
    monkeypatch.delenv("LLMAZ_BOOTSTRAP_DIR")
    assert uv_binary() == str(cached)  # its default place


def test_no_uv_anywhere_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("LLMAZ_BOOTSTRAP_DIR", raising=False)
    with pytest.raises(UvNotFound, match=r"run tools/bootstrap\.sh"):
        uv_binary()
