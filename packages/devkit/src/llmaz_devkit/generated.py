"""Files generated from one source and committed: compare them with a tree, write them, and the
``--check``-or-write step each generator's ``main`` ends with (``chartgen``, ``crdgen``)."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["check_or_write", "drift", "write"]


def drift(root: Path, files: Mapping[Path, str], owned: Iterable[Path] = ()) -> list[str]:
    """Differences between the generated ``files`` and the tree at ``root`` (empty when in sync).

    :param files: generated text by path relative to ``root``.
    :param owned: files of ``root`` (relative) in directories the generator owns; one it no longer
        generates is reported as stale.
    :returns: one unified diff per changed file (``<path>: missing`` for an absent empty one), then
        one line per stale file.
    """
    problems: list[str] = []
    for rel, text in files.items():
        path = root / rel
        current = path.read_text() if path.is_file() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
            )
            problems.append("".join(diff) or f"{rel}: missing")
    for rel in owned:
        if rel not in files:
            problems.append(f"{rel}: stale file, not generated any more (delete it)")
    return problems


def write(root: Path, files: Mapping[Path, str], owned: Iterable[Path] = ()) -> None:
    """Delete the stale ``owned`` files and write every generated file whose text changed."""
    for rel in owned:
        if rel not in files:
            (root / rel).unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)


def check_or_write(
    root: Path,
    files: Mapping[Path, str],
    *,
    check: bool,
    what: str,
    command: str,
    owned: Iterable[Path] = (),
) -> int:
    """The end of a generator's ``main``: with ``check``, print the drift and return 1 when there is
    any (0 otherwise); without, write the files. ``what`` names the files in messages ("generated
    chart files"); ``command`` is what regenerates them."""
    if check:
        problems = drift(root, files, owned)
        if problems:
            sys.stdout.write("\n".join(problems) + "\n")
            sys.stderr.write(f"{what} drift: run `{command}` and commit\n")
            return 1
        print(f"{len(files)} {what} are up to date")
        return 0
    write(root, files, owned)
    print(f"wrote {len(files)} files under {root}")
    return 0
