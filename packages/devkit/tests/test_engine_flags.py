"""Runtime drift: every option a bundled backend plugin renders is one its engine declares, at the
release the plugin is checked against (``llmaz_devkit.engineflags.ENGINE_SOURCES``).

The engines' sources come from PyPI on the first run and from ``~/.cache/llmaz/engine-sources``
after it; a failed download fails these tests (a skip would hide drift). Docs:
docs/development/engine-flags.md."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import IO, ClassVar

import pytest

from llmaz.api import RecommendedConfig
from llmaz.plugins import SPECULATIVE_CONFIG, Backend, MultiHostRecipe, PluginManager
from llmaz_backend_llamacpp import LlamaCppBackend
from llmaz_backend_sglang import SGLangBackend
from llmaz_backend_vllm import VLLMBackend
from llmaz_devkit import engineflags
from llmaz_devkit.engineflags import (
    ENGINE_SOURCES,
    UNCHECKED,
    Declared,
    EngineSourceError,
    Status,
    declared_options,
    fetch_sources,
    pypi_version_of_image,
    rendered_options,
    undeclared,
)


def _bundled_backends() -> dict[str, Backend]:
    """The backends of the repository's own plugins (``builtin``: same Source URL as llmaz)."""
    manager = PluginManager(autoload=True, trace=False, environ={}, commands=False)
    manager.load()
    assert not manager.errors, [str(e) for e in manager.errors]
    return {
        name: backend
        for name, backend in manager.backends.items()
        if (owner := manager.owner_of_backend(name)) is not None and owner.origin == "builtin"
    }


BACKENDS = _bundled_backends()
CHECKED = sorted(ENGINE_SOURCES)


@functools.cache
def _declared(name: str) -> Declared:
    return declared_options(ENGINE_SOURCES[name])


def test_every_bundled_backend_is_checked_or_says_why_not() -> None:
    assert not set(ENGINE_SOURCES) & set(UNCHECKED)
    assert set(BACKENDS) == set(ENGINE_SOURCES) | set(UNCHECKED), (
        "add the backend to ENGINE_SOURCES (with the release its options are checked against) or, "
        "when its source cannot be had, to UNCHECKED with the reason"
    )


@pytest.mark.parametrize("name", CHECKED)
def test_checked_release_is_the_plugins_image_release(name: str) -> None:
    """Bumping a plugin's image without re-checking its options fails here."""
    backend, source = BACKENDS[name], ENGINE_SOURCES[name]
    if source.floating_tag is not None:
        assert backend.version == source.floating_tag, (
            f"{name} now pins image tag {backend.version!r} instead of following {source.floating_tag!r}: "
            f"check its options against that release and update ENGINE_SOURCES[{name!r}]"
        )
        return
    assert pypi_version_of_image(backend.version) == source.version, (
        f"{name}'s image {backend.image}:{backend.version} is not {source.pin}: update ENGINE_SOURCES"
        f"[{name!r}] to the image's release and fix any option this test then reports"
    )


@pytest.mark.parametrize("name", CHECKED)
def test_rendered_options_are_declared_by_the_engine(name: str) -> None:
    problems = undeclared(BACKENDS[name], ENGINE_SOURCES[name], _declared(name))
    assert not problems, "\n".join(problems)


KNOWN: dict[str, dict[str, Status | None]] = {
    "vllm": {
        "--tensor-parallel-size": Status.DECLARED,
        "-tp": Status.DECLARED,
        "--speculative-config": Status.DECLARED,
        "-sc": Status.DECLARED,
        "--host": Status.DECLARED,  # a frontend dataclass field
        "--served-model-name": Status.DECLARED,
        "--no-such-option": None,
    },
    "sglang": {
        "--tp-size": Status.DECLARED,
        "--tensor-parallel-size": Status.DECLARED,  # an Arg(aliases=...)
        "--tp": None,  # only argparse's abbreviation of --tp-size
        "--stream-output": Status.DEPRECATED,
        "--enable-expert-distribution-metrics": Status.REMOVED,
        "--stat-loggers": None,  # a field without help or Arg: no option
    },
    "llamacpp": {
        "--spec-draft-n-max": Status.DECLARED,
        "-m": Status.DECLARED,
        "--no-context-shift": Status.DECLARED,  # a negated spelling
        "--draft-max": Status.REMOVED,
        "--draft-min": Status.REMOVED,
        "--prompt": Status.OTHER_PROGRAM,  # llama-cli's, not llama-server's
    },
}


@pytest.mark.parametrize("name", CHECKED)
def test_parser_finds_known_options(name: str) -> None:
    """Positive control: a parser that found nothing (or everything) cannot pass the check above."""
    declared = _declared(name)
    assert sum(s is Status.DECLARED for s in declared.options.values()) > 100
    assert {flag: declared.options.get(flag) for flag in KNOWN[name]} == KNOWN[name]


def test_every_checked_engine_has_known_options() -> None:
    assert set(KNOWN) == set(ENGINE_SOURCES)


# ---- the check catches the drift fixed in 6b9188d (the plugins as they were before it) -----------
class _OldSpeculativeLlamaCpp(LlamaCppBackend):
    def recommended_configs(self) -> list[RecommendedConfig]:
        configs = super().recommended_configs()
        default = next(c for c in configs if c.name == "default")
        args = [
            *(default.args or []),
            "-md",
            "{{ .DraftModelPath }}",
            "--draft-max",
            "16",
            "--draft-min",
            "5",
        ]
        return [default, default.model_copy(update={"name": SPECULATIVE_CONFIG, "args": args})]


class _OldTensorParallelSGLang(SGLangBackend):
    tensor_parallel_flag: ClassVar[str | None] = "--tp"


def test_reports_llamacpp_removed_draft_options() -> None:
    problems = "\n".join(
        undeclared(_OldSpeculativeLlamaCpp(), ENGINE_SOURCES["llamacpp"], _declared("llamacpp"))
    )
    assert "config speculative-decoding: --draft-max is removed" in problems
    assert "--draft-min is removed" in problems
    assert "-md is" not in problems


def test_reports_sglang_undeclared_tp() -> None:
    problems = undeclared(_OldTensorParallelSGLang(), ENGINE_SOURCES["sglang"], _declared("sglang"))
    assert len(problems) == 1
    assert "tensor_parallel_flag: --tp is not declared" in problems[0]
    assert "--tp-size" in problems[0]  # among the nearest declared spellings


# ---- what counts as a rendered option (no network) -----------------------------------------------
def test_options_of_a_shell_recipe_are_those_after_the_engine_command() -> None:
    class Scripted(VLLMBackend):
        def multi_host_recipe(self) -> MultiHostRecipe:
            recipe = VLLMBackend().multi_host_recipe()
            script = (
                'ray start --head --port=6379 && tries=0; exec vllm serve m --max-model-len=-1 --x=1 "$@"'
            )
            return recipe.model_copy(update={"leader_args": [script, "vllm-leader"]})

    found, lost = rendered_options(Scripted())
    leader = [o.flag for o in found if o.where == "multi-host leader"]
    assert leader == ["--max-model-len", "--x"]  # not ray's --head/--port, not the value -1
    assert "multi-host worker" not in {o.where for o in found}  # the worker runs ray only
    assert not lost


def test_a_leader_that_never_starts_the_engine_is_reported() -> None:
    class Lost(VLLMBackend):
        def multi_host_recipe(self) -> MultiHostRecipe:
            recipe = VLLMBackend().multi_host_recipe()
            return recipe.model_copy(update={"leader_args": ["sleep 1", "x"]})

    problems = undeclared(Lost(), ENGINE_SOURCES["vllm"], _declared("vllm"))
    assert problems == ["backend 'vllm' multi-host leader: no `vllm serve` invocation found"]


@pytest.mark.parametrize(
    ("tag", "release"),
    [("v0.25.0", "0.25.0"), ("v0.5.19-cu129", "0.5.19"), ("3.3.5", "3.3.5"), ("server", None)],
)
def test_pypi_version_of_image(tag: str, release: str | None) -> None:
    assert pypi_version_of_image(tag) == release


# ---- fetching (no network) -----------------------------------------------------------------------
def test_an_unreachable_index_is_an_error_naming_package_and_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engineflags, "INDEX", "http://127.0.0.1:9/simple")
    with pytest.raises(EngineSourceError, match=r"vllm==0\.25\.0 at http://127\.0\.0\.1:9/simple/vllm/"):
        fetch_sources(ENGINE_SOURCES["vllm"], cache=tmp_path)


def test_an_interrupted_download_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def release_file(source: engineflags.EngineSource) -> tuple[str, str, str]:
        return "vllm-0.25.0.tar.gz", "https://files.example/vllm-0.25.0.tar.gz", "0" * 64

    def download(url: str, into: IO[bytes], sha256: str, pin: str) -> None:
        into.write(b"\x1f\x8b half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(engineflags, "_release_file", release_file)
    monkeypatch.setattr(engineflags, "_download", download)
    with pytest.raises(KeyboardInterrupt):
        fetch_sources(ENGINE_SOURCES["vllm"], cache=tmp_path)
    assert list(tmp_path.iterdir()) == []
