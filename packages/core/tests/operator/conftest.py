"""What the operator's unit tests share: a stand-in for the API server's child writes and a
:class:`~llmaz.operator.runtime.Runtime` around it (the real API server is in e2e/)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.operator import engine
from llmaz.operator.config import OperatorConfig
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Runtime


class ChildWrites:
    """Stand-in for the API server's writes of children and status (named so: no API server here).
    Records each as ``("create" | "apply" | "status", object)`` and answers the object with a new
    resourceVersion; the names in ``existing`` answer a create with 409, as the API server does for
    an object that exists."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.version = 100
        self.existing: set[str] = set()

    @property
    def applied(self) -> list[dict[str, Any]]:
        """Every object written, created or applied."""
        return [obj for _, obj in self.writes]

    def _answer(self, verb: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.writes.append((verb, obj))
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}

    def create_or_apply(self, obj: dict[str, Any], *, exists: bool, held: Any = None) -> dict[str, Any]:
        if exists or obj["metadata"]["name"] in self.existing:
            return self._answer("apply", obj)
        return self._answer("create", obj)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._answer("apply", obj)

    def patch_status(
        self, api_version: str, kind: str, namespace: str | None, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """A status patch, recorded as ``("status", {kind, name, status})``."""
        return self._answer("status", {"kind": kind, "metadata": {"name": name}, "status": status})

    # the reconciles write on the event loop (Kube.*_async): the same answers
    async def create_or_apply_async(
        self, obj: dict[str, Any], *, exists: bool, held: Any = None
    ) -> dict[str, Any]:
        return self.create_or_apply(obj, exists=exists)

    async def apply_async(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.apply(obj)

    async def patch_status_async(
        self, api_version: str, kind: str, namespace: str | None, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        return self.patch_status(api_version, kind, namespace, name, status)


@pytest.fixture
def child_writes() -> ChildWrites:
    return ChildWrites()


@pytest.fixture
def make_runtime() -> Callable[[Any], Runtime]:
    """A Runtime (default configuration, no plugins) whose API adapter is the given stand-in."""

    def make(kube: Any) -> Runtime:
        return Runtime(
            config=OperatorConfig(),
            plugins=None,  # type: ignore[arg-type]
            kube=kube,
            metrics=Metrics(kinds=("Playground", "Service")),
            identity="unit",
        )

    return make


@pytest.fixture
def apply_children() -> Callable[..., None]:
    """``engine.apply_children(rt, ...)`` run to the end, with the creates it started in the
    background."""

    def run(rt: Runtime, *args: Any) -> None:
        async def all_of_it() -> None:
            await engine.apply_children(rt, *args)
            while rt.tasks:
                await asyncio.gather(*list(rt.tasks))

        asyncio.run(all_of_it())

    return run
