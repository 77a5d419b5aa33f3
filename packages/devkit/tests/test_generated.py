"""The write / ``--check`` step every generator (chartgen, crdgen) ends with."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmaz_devkit.generated import check_or_write, drift

FILES = {Path("out/a.yaml"): "a: 1\n", Path("out/b.md"): "# b\n"}


def run(root: Path, *, check: bool, owned: list[Path] | None = None) -> int:
    return check_or_write(root, FILES, check=check, what="test files", command="regen", owned=owned or [])


def test_write_then_check_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, check=True) == 1  # nothing written yet: both files are missing
    assert run(tmp_path, check=False) == 0
    assert (tmp_path / "out/a.yaml").read_text() == "a: 1\n"
    capsys.readouterr()
    assert run(tmp_path, check=True) == 0
    assert capsys.readouterr().out == "2 test files are up to date\n"


def test_check_prints_a_diff_and_the_command_that_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(tmp_path, check=False)
    (tmp_path / "out/a.yaml").write_text("a: 2\n")
    capsys.readouterr()
    assert run(tmp_path, check=True) == 1
    out, err = capsys.readouterr()
    assert "-a: 2\n+a: 1\n" in out
    assert err == "test files drift: run `regen` and commit\n"


def test_a_stale_owned_file_is_reported_and_deleted_on_write(tmp_path: Path) -> None:
    run(tmp_path, check=False)
    stale = Path("out/old.md")
    (tmp_path / stale).write_text("old")
    owned = [*FILES, stale]
    assert drift(tmp_path, FILES, owned) == ["out/old.md: stale file, not generated any more (delete it)"]
    assert run(tmp_path, check=False, owned=owned) == 0
    assert not (tmp_path / stale).exists()
    assert drift(tmp_path, FILES, list(FILES)) == []
