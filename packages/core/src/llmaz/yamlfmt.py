"""The one YAML writer of llmaz: manifests and pages read the same wherever they are printed.

Keys keep their order, multi-line strings (shell scripts, descriptions) are literal ``|`` blocks, and
objects shared inside a structure are written out again, never as ``&id001`` anchors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

__all__ = ["Dumper", "dump", "dump_all"]


class Dumper(yaml.SafeDumper):
    """SafeDumper with literal blocks for multi-line strings and no anchors/aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, _str_representer)


def dump(data: Any, *, width: int | None = None, allow_unicode: bool = False) -> str:
    """One YAML document."""
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=width, allow_unicode=allow_unicode)


def dump_all(documents: Iterable[Any]) -> str:
    """A ``---``-separated YAML stream, each document starting with ``---``."""
    return yaml.dump_all(documents, Dumper=Dumper, sort_keys=False, explicit_start=True)
