"""Registries handed to the registration hooks (see :mod:`llmaz.plugins.hookspecs`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from llmaz.errors import LlmazError
from llmaz.plugins.autoscaler import Autoscaler
from llmaz.plugins.backend import Backend

__all__ = ["AutoscalerRegistry", "BackendRegistry", "CommandRegistry", "RegistrationError"]

T = TypeVar("T", Backend, Autoscaler)


class RegistrationError(LlmazError):
    """A plugin registered something invalid; the message says what."""


class _Registry(Generic[T]):
    kind: str = ""
    base: type[T]

    def __init__(self) -> None:
        self.items: list[T] = []

    def add(self, item: type[T] | T) -> None:
        """Register a subclass (instantiated with no arguments) or an instance."""
        if isinstance(item, type):
            if not issubclass(item, self.base):
                raise RegistrationError(f"{item!r} is not a subclass of {self.base.__qualname__}")
            try:
                obj = item()
            except Exception as exc:
                raise RegistrationError(f"cannot instantiate {item.__qualname__}: {exc}") from exc
        elif isinstance(item, self.base):
            obj = item
        else:
            raise RegistrationError(f"{item!r} is not a {self.base.__qualname__}")
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"{type(obj).__qualname__} has no name")
        if any(existing.name == name for existing in self.items):
            raise RegistrationError(f"{self.kind} {name!r} registered twice")
        self.items.append(obj)


class BackendRegistry(_Registry[Backend]):
    """Passed to ``llmaz_register_backends``: call :meth:`add` once per backend."""

    kind = "backend"
    base = Backend


class AutoscalerRegistry(_Registry[Autoscaler]):
    """Passed to ``llmaz_register_autoscalers``: call :meth:`add` once per autoscaler."""

    kind = "autoscaler"
    base = Autoscaler


_COMMAND_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class CommandRegistry:
    """Passed to ``llmaz_register_commands``: call :meth:`add` once per ``llmaz`` command.

    The core commands (``render``, ``crds``, ``plugins``...) are added the same way, so every command
    is mounted by one function of :mod:`llmaz.cli`.
    """

    kind = "command"

    def __init__(self) -> None:
        self.items: dict[str, Callable[..., Any]] = {}

    def add(self, name: str, command: Callable[..., Any]) -> None:
        """Add ``llmaz <name>``: a ``typer.Typer`` (a command group) or a function (one command,
        its parameters typed as typer options and arguments)."""
        if not isinstance(name, str) or not _COMMAND_NAME.match(name):
            raise RegistrationError(
                f"command name {name!r} must be lowercase letters, digits and '-', starting with a letter"
            )
        if not callable(command):
            raise RegistrationError(f"command {name!r}: {command!r} is neither a typer.Typer nor a function")
        if name in self.items:
            raise RegistrationError(f"command {name!r} registered twice")
        self.items[name] = command
