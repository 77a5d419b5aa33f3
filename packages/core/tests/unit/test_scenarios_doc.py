"""docs/development/llmaz-scenarios.md maps each scenario of llmaz's Go suites to a test of ours:
every test it names must exist, down to the case of a parametrized test (collected by pytest
itself, so a renamed test or a removed case fails here, not silently in the docs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
PAGE = ROOT / "docs" / "development" / "llmaz-scenarios.md"
TEST_ID = re.compile(r"`((?:e2e|packages)/[\w/.-]+\.py::\w+(?:\[[^\]`]+\])?)`")


def _table_rows() -> list[str]:
    """Body rows of every table (not header rows, which a ``|---`` line follows)."""
    lines = PAGE.read_text().splitlines()
    return [
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if line.startswith("|") and not line.startswith("|---") and not after.startswith("|---")
    ]


def test_every_row_names_a_test_or_says_why_none_applies() -> None:
    rows = _table_rows()
    assert len(rows) >= 60, "the page lost scenarios"
    bare = [row for row in rows if not TEST_ID.search(row) and "does not apply" not in row]
    assert bare == [], bare


def test_every_named_test_is_collected() -> None:
    named = sorted(set(TEST_ID.findall(PAGE.read_text())))
    files = sorted({n.split("::")[0] for n in named})
    missing_files = [f for f in files if not (ROOT / f).is_file()]
    assert missing_files == [], missing_files
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--snapshot-warn-unused",
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    ids = {line.strip() for line in collected.stdout.splitlines() if "::" in line}
    functions = {i.split("[")[0] for i in ids}
    missing = [n for n in named if n not in (ids if "[" in n else functions)]
    assert missing == [], f"named in {PAGE.name} but not collected: {missing}"
