"""The plugin manager's load policy: broken plugins are skipped with one clear error naming them."""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import ClassVar

import pytest

from llmaz.api import RecommendedConfig
from llmaz.plugins import (
    PLUGIN_API_VERSION,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    Backend,
    BackendRegistry,
    PluginManager,
    hookimpl,
)
from llmaz.plugins import manager as manager_module
from llmaz.plugins.manager import api_version_compatible
from llmaz.testing.plugins import make_plugin_manager, make_plugin_module

Factory = Callable[..., PluginManager]


class Good(Backend):
    name: ClassVar[str] = "good"
    image: ClassVar[str] = "example/good"
    version: ClassVar[str] = "1"

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [RecommendedConfig(name="default", args=["--model", "{{ .ModelPath }}", "--port", "8080"])]


class Other(Good):
    name: ClassVar[str] = "other"


class EmptyImage(Good):
    name: ClassVar[str] = "empty-image"
    image: ClassVar[str] = ""


class NoDefault(Good):
    name: ClassVar[str] = "no-default"

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [RecommendedConfig(name="fast")]


class BadProbe(Good):
    name: ClassVar[str] = "bad-probe"

    def envs(self):  # type: ignore[no-untyped-def]
        return [{"not": "an EnvVar"}]


class Scaler(Autoscaler):
    name: ClassVar[str] = "scaler"

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        return AutoscalingOutput()


def only_error(pm: PluginManager) -> str:
    assert len(pm.errors) == 1, [str(e) for e in pm.errors]
    return str(pm.errors[0])


def test_good_plugins_register(plugin_manager_factory: Factory) -> None:
    pm = plugin_manager_factory(make_plugin_module("p", backends=[Good], autoscalers=[Scaler]))
    assert isinstance(pm.get_backend("good"), Good)
    assert isinstance(pm.get_autoscaler("scaler"), Scaler)
    assert pm.errors == []
    info = pm.plugins[0]
    assert (info.kind, info.backends, info.autoscalers, info.origin) == (
        "backend+autoscaler",
        ["good"],
        ["scaler"],
        "local",
    )
    pm.check_pending()


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (EmptyImage, "backend 'empty-image' produced an invalid BackendRuntime: ValidationError"),
        (NoDefault, "backend 'no-default' has no 'default' recommended config"),
        (BadProbe, "backend 'bad-probe' produced an invalid BackendRuntime"),
    ],
)
def test_invalid_object_skips_only_that_plugin(backend: type[Backend], expected: str) -> None:
    pm = make_plugin_manager(
        make_plugin_module("fine", backends=[Good]), make_plugin_module("broken", backends=[backend])
    )
    error = only_error(pm)
    assert error.startswith("plugin 'broken' skipped at validate:")
    assert expected in error
    assert list(pm.backends) == ["good"]
    assert next(p for p in pm.plugins if p.name == "broken").status == "error"


def test_same_name_from_two_plugins(plugin_manager_factory: Factory) -> None:
    pm = plugin_manager_factory(
        make_plugin_module("first", backends=[Good]), make_plugin_module("second", backends=[Other, Good])
    )
    error = only_error(pm)
    assert "plugin 'second' skipped at collect" in error
    assert "backend 'good' is already registered by plugin 'first'" in error
    assert sorted(pm.backends) == ["good"]  # 'second' is skipped as a whole, 'other' included


def test_same_name_twice_in_one_plugin(plugin_manager_factory: Factory) -> None:
    pm = plugin_manager_factory(
        make_plugin_module("dup", backends=[Good, Good]), make_plugin_module("fine", autoscalers=[Scaler])
    )
    assert "plugin 'dup' skipped at collect: backend 'good' registered twice" in only_error(pm)
    assert pm.backends == {}
    assert list(pm.autoscalers) == ["scaler"]


def test_hook_that_raises(plugin_manager_factory: Factory) -> None:
    module = make_plugin_module("raiser")

    @hookimpl
    def llmaz_register_backends(register: BackendRegistry) -> None:
        raise RuntimeError("engine catalogue unavailable")

    module.llmaz_register_backends = llmaz_register_backends  # type: ignore[attr-defined]
    pm = plugin_manager_factory(module, make_plugin_module("fine", backends=[Good]))
    assert "plugin 'raiser' skipped at collect: registration hook raised RuntimeError" in only_error(pm)
    assert list(pm.backends) == ["good"]


def test_registering_something_that_is_not_a_backend(plugin_manager_factory: Factory) -> None:
    pm = plugin_manager_factory(make_plugin_module("odd", backends=[object]))  # type: ignore[list-item]
    assert "is not a subclass of Backend" in only_error(pm)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (None, "does not declare LLMAZ_PLUGIN_API"),
        (">=2", "supports plugin API '>=2' but this host implements 1"),
        ("one", "cannot parse LLMAZ_PLUGIN_API constraint 'one'"),
    ],
)
def test_plugin_api_version_is_checked(declared: object, message: str) -> None:
    pm = make_plugin_manager(make_plugin_module("old", backends=[Good], api=declared))
    error = only_error(pm)
    assert error.startswith("plugin 'old' skipped at api-version")
    assert message in error
    assert pm.backends == {}


def test_api_version_forms() -> None:
    assert PLUGIN_API_VERSION == "1"
    assert api_version_compatible("1")
    assert api_version_compatible(1)
    assert api_version_compatible(">=1,<2")
    assert api_version_compatible(["0", "1"])
    assert not api_version_compatible("<1")
    assert not api_version_compatible("2")


def test_unknown_hook_and_no_hook(plugin_manager_factory: Factory) -> None:
    typo = make_plugin_module("typo")

    @hookimpl
    def llmaz_register_backend(register: BackendRegistry) -> None:  # missing "s"
        register.add(Good)

    typo.llmaz_register_backend = llmaz_register_backend  # type: ignore[attr-defined]
    empty = make_plugin_module("empty")
    pm = plugin_manager_factory(typo, empty)
    messages = [str(e) for e in pm.errors]
    assert messages == [
        "plugin 'typo' skipped at register: implements unknown hook(s) llmaz_register_backend",
        "plugin 'empty' skipped at register: implements no llmaz hook (forgot @llmaz.plugins.hookimpl?)",
    ]
    pm.check_pending()


def test_disabled_by_name() -> None:
    pm = make_plugin_manager(
        make_plugin_module("a", backends=[Good]), make_plugin_module("b", backends=[Other]), disabled=["a"]
    )
    assert list(pm.backends) == ["other"]
    assert [(p.name, p.status) for p in pm.plugins] == [("a", "blocked"), ("b", "loaded")]


# --- entry points --------------------------------------------------------------------------------


@pytest.fixture
def broken_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Adds entry points that fail at import next to the real (first-party) ones."""
    (tmp_path / "llmaz_test_boom.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "llmaz_test_needs_dep.py").write_text("import llmaz_no_such_dependency\n")
    (tmp_path / "llmaz_test_ok.py").write_text(
        textwrap.dedent(
            """
            from llmaz.plugins import hookimpl
            LLMAZ_PLUGIN_API = "1"
            @hookimpl
            def llmaz_register_backends(register):
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fakes = [
        metadata.EntryPoint(name="boom", value="llmaz_test_boom", group="llmaz"),
        metadata.EntryPoint(name="needs-dep", value="llmaz_test_needs_dep", group="llmaz"),
        metadata.EntryPoint(name="ok", value="llmaz_test_ok", group="llmaz"),
    ]
    real = metadata.entry_points

    def entry_points(**kwargs: str) -> list[metadata.EntryPoint]:
        return [*real(**kwargs), *fakes]

    monkeypatch.setattr(manager_module.metadata, "entry_points", entry_points)
    yield [ep.name for ep in fakes]
    for mod in ("llmaz_test_boom", "llmaz_test_needs_dep", "llmaz_test_ok"):
        sys.modules.pop(mod, None)


def test_plugin_raising_at_import_is_skipped(
    broken_entry_points: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="llmaz.plugins"):
        pm = PluginManager.from_environment(environ={})
    messages = [str(e) for e in pm.errors]
    assert messages == [
        "plugin 'boom' skipped at import: RuntimeError: boom at import",
        "plugin 'needs-dep' skipped at import: "
        "ModuleNotFoundError: No module named 'llmaz_no_such_dependency'",
    ]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == messages
    # the first-party plugins keep working
    assert {"vllm", "sglang", "llamacpp", "ollama", "tgi", "tensorrt-llm"} <= set(pm.backends)
    assert {"hpa", "karpenter"} <= set(pm.autoscalers)
    statuses = {p.name: p.status for p in pm.plugins}
    assert statuses["boom"] == statuses["needs-dep"] == "error"
    assert statuses["ok"] == "loaded"


def test_builtins_load_through_entry_points_with_distribution() -> None:
    pm = PluginManager.from_environment(environ={})
    assert pm.errors == []
    vllm = pm.owner_of_backend("vllm")
    assert vllm is not None
    assert (vllm.name, vllm.distribution, vllm.origin) == ("vllm", "llmaz-backend-vllm", "builtin")
    trt = pm.owner_of_backend("tensorrt-llm")
    assert trt is not None
    assert trt.distribution == "llmaz-backend-tensorrt-llm"


def test_environment_switches(caplog: pytest.LogCaptureFixture) -> None:
    pm = PluginManager.from_environment(environ={"LLMAZ_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert (pm.plugins, pm.backends) == ([], {})
    pm = PluginManager.from_environment(environ={"LLMAZ_DISABLED_PLUGINS": "vllm, tgi"})
    assert "vllm" not in pm.backends
    assert "tgi" not in pm.backends
    assert "sglang" in pm.backends
    assert {p.name: p.status for p in pm.plugins}["vllm"] == "blocked"
    with caplog.at_level(logging.INFO, logger="llmaz.plugins.trace"):
        PluginManager.from_environment(environ={"LLMAZ_TRACE_PLUGINS": "1"})
    assert any("call llmaz_register_backends -> ['vllm']" in r.getMessage() for r in caplog.records)
