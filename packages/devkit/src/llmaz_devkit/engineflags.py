"""The command-line options each engine declares in its own source, at the release a bundled backend
plugin is checked against, and the options that plugin renders.

An engine that renames or removes an option makes every Pod that passes it exit at start-up (llama.cpp
refused ``--draft-max``; SGLang's ``--tp`` only ever worked as argparse's abbreviation of ``--tp-size``).
Unit and snapshot tests cannot see that: they compare llmaz with itself. This module reads the
options from the engine's source instead: the release's files on PyPI (an sdist when it carries the
Python sources, else a wheel), downloaded once into ``~/.cache/llmaz/engine-sources/<dist>-<version>/``
(override with ``LLMAZ_ENGINE_SOURCES_CACHE``) and parsed as text or Python syntax, never imported.

:data:`ENGINE_SOURCES` is the one place that says which release each engine is checked against;
:data:`UNCHECKED` says why the other bundled backends are not. ``packages/devkit/tests/
test_engine_flags.py`` holds every plugin to them (docs: ``docs/development/engine-flags.md``).
"""

from __future__ import annotations

import ast
import difflib
import enum
import hashlib
import http.client
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from llmaz.errors import LlmazError
from llmaz.plugins import Backend
from llmaz.testing.conformance import rendered_commands

__all__ = [
    "ENGINE_SOURCES",
    "UNCHECKED",
    "Declared",
    "EngineSource",
    "EngineSourceError",
    "RenderedOption",
    "Status",
    "cache_root",
    "declared_options",
    "fetch_sources",
    "pypi_version_of_image",
    "rendered_options",
    "undeclared",
]

INDEX = "https://pypi.org/simple"
"""PyPI's simple index (its JSON form, PEP 691): file URLs and their sha256."""


class EngineSourceError(LlmazError, RuntimeError):
    """An engine's source could not be fetched, or no longer has the shape its parser reads."""


class Status(enum.StrEnum):
    """What the engine does with an option it knows."""

    DECLARED = "declared"
    DEPRECATED = "deprecated (still accepted, with a warning)"
    REMOVED = "removed (refused, or accepted and ignored)"
    OTHER_PROGRAM = "declared only for another program of the engine"


@dataclass(frozen=True)
class Declared:
    """The options an engine release knows, with what it does with each."""

    options: Mapping[str, Status]

    def nearest(self, flag: str) -> list[str]:
        """Up to three declared spellings closest to ``flag`` (for failure messages): first those it
        abbreviates (what argparse would have expanded it to), then the most similar."""
        usable = sorted(o for o, s in self.options.items() if s is Status.DECLARED)
        extended = [o for o in usable if o.startswith(flag)]
        similar = difflib.get_close_matches(flag, usable, n=3, cutoff=0.6)
        return list(dict.fromkeys([*extended, *similar]))[:3]


Files = Mapping[str, str]
"""Archive path (relative to an sdist's top directory) -> text."""


@dataclass(frozen=True)
class EngineSource:
    """Where one engine declares its options: a PyPI release and the files in it."""

    dist: str
    version: str
    package_type: Literal["sdist", "wheel"]
    files: tuple[str, ...]
    parse: Callable[[Files], dict[str, Status]]
    program: str
    """The program whose options these are (for messages)."""
    floating_tag: str | None = None
    """The plugin's image tag when it follows the engine's main branch, so :attr:`version` cannot be
    derived from it and is a stated fact instead (see :func:`pypi_version_of_image`)."""

    @property
    def pin(self) -> str:
        return f"{self.dist}=={self.version}"


# --------------------------------------------------------------------------------------- parsers
def _strings(nodes: list[ast.expr]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _add_argument_calls(tree: ast.AST) -> Iterator[tuple[list[str], ast.Call]]:
    """Each ``<anything>.add_argument("--a", "-b", ...)`` with its literal option strings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            flags = [s for s in _strings(node.args) if s.startswith("-")]
            if flags:
                yield flags, node


def _field_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _require(files: Files, path: str, text: str, why: str) -> None:
    if text not in files[path]:
        raise EngineSourceError(f"{path} no longer contains {text!r} ({why}): update the parser")


VLLM_ARGS = "vllm/engine/arg_utils.py"
VLLM_FRONTEND = "vllm/entrypoints/openai/cli_args.py"


def parse_vllm(files: Files) -> dict[str, Status]:
    """``add_argument("--x", "-y", ...)`` in the engine and frontend argument modules, and the
    fields of the frontend's ``@config`` dataclasses (``host`` -> ``--host``)."""
    found: dict[str, Status] = {}
    for path in (VLLM_ARGS, VLLM_FRONTEND):
        for flags, call in _add_argument_calls(ast.parse(files[path])):
            deprecated = _keyword(call, "deprecated")
            status = Status.DEPRECATED if isinstance(deprecated, ast.Constant) and deprecated.value else None
            found.update(dict.fromkeys(flags, status or Status.DECLARED))
    _require(files, VLLM_FRONTEND, "f\"--{key.replace('_', '-')}\"", "frontend options named after fields")
    for node in ast.walk(ast.parse(files[VLLM_FRONTEND])):
        if isinstance(node, ast.ClassDef) and any(
            isinstance(d, ast.Name) and d.id == "config" for d in node.decorator_list
        ):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found.setdefault(_field_flag(item.target.id), Status.DECLARED)
    return found


SGLANG_ARGS = "sglang/srt/server_args.py"
SGLANG_DERIVE = "sglang/srt/arg_groups/arg_utils.py"


def _sglang_action_status(action: ast.expr | None) -> Status:
    name = action.id if isinstance(action, ast.Name) else ""
    if name == "DeprecatedAction":  # errors out, or warns and sets nothing
        return Status.REMOVED
    return Status.DEPRECATED if name.startswith("Deprecated") else Status.DECLARED


def parse_sglang(files: Files) -> dict[str, Status]:
    """The ``A[type, "help" | Arg(...)]`` fields of ``ServerArgs`` (``tp_size`` -> ``--tp-size``, plus
    ``Arg(aliases=[...])``, minus ``Arg(no_cli=True)`` and fields with neither help nor ``Arg``) and
    the ``add_argument`` calls of the module."""
    _require(files, SGLANG_DERIVE, 'return "--" + name.replace("_", "-")', "options named after fields")
    tree = ast.parse(files[SGLANG_ARGS])
    found: dict[str, Status] = {}
    server_args = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"]
    if not server_args:
        raise EngineSourceError(f"{SGLANG_ARGS} no longer defines ServerArgs: update the parser")
    for item in server_args[0].body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        ann = item.annotation
        if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "A"):
            continue
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        arg = next(
            (
                p
                for p in parts
                if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id == "Arg"
            ),
            None,
        )
        if arg is None and not _strings(parts[1:]):  # A[type, NS(...)] alone: not an option
            continue
        flags = [_field_flag(item.target.id)]
        status = Status.DECLARED
        if arg is not None:
            no_cli = _keyword(arg, "no_cli")
            if isinstance(no_cli, ast.Constant) and no_cli.value is True:
                continue
            cli_name = _keyword(arg, "cli_name")
            if isinstance(cli_name, ast.Constant) and isinstance(cli_name.value, str):
                flags = [cli_name.value]
            aliases = _keyword(arg, "aliases")
            if isinstance(aliases, ast.List):
                flags += _strings(aliases.elts)
            status = _sglang_action_status(_keyword(arg, "action"))
        found.update(dict.fromkeys(flags, status))
    for flags, call in _add_argument_calls(tree):
        found.update(dict.fromkeys(flags, _sglang_action_status(_keyword(call, "action"))))
    return found


LLAMACPP_ARGS = "vendor/llama.cpp/common/arg.cpp"
_CPP_LINE_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_COMMON_ARG = re.compile(r"\bcommon_arg\(\s*")
_STRING_LIST = re.compile(r',?\s*\{\s*("[^"]*"(?:\s*,\s*"[^"]*")*)\s*\}\s*')
_SET = re.compile(r"\.set_(examples|excludes)\(\s*\{([^}]*)\}")


def parse_llamacpp(files: Files) -> dict[str, Status]:
    """``common_arg({"--a", "-b"}[, {"--no-a"}], ...)`` in ``common/arg.cpp``, as ``llama-server``
    sees them: options of ``LLAMA_EXAMPLE_COMMON`` or ``_SERVER`` not excluded for the server; an
    option whose handler calls ``arg_removed(...)`` is removed (parsing it throws)."""
    text = _CPP_LINE_COMMENT.sub("", files[LLAMACPP_ARGS])
    _require({LLAMACPP_ARGS: text}, LLAMACPP_ARGS, "static void arg_removed(", "how removed options fail")
    starts = [m.end() for m in _COMMON_ARG.finditer(text)]
    found: dict[str, Status] = {}
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        block = text[start:end]
        names: list[str] = []
        at = 0
        for _ in range(2):  # the options, then the negated ones (``--no-x``) of a boolean option
            match = _STRING_LIST.match(block, at)
            if not match:
                break
            names += re.findall(r'"([^"]*)"', match.group(1))
            at = match.end()
        if not names:
            raise EngineSourceError(f"{LLAMACPP_ARGS}: a common_arg without an option list: {block[:80]!r}")
        if "set_preset_only()" in block:  # preset-file keys, not command-line options
            continue
        sets = {kind: set(re.findall(r"LLAMA_EXAMPLE_\w+", body)) for kind, body in _SET.findall(block)}
        examples = sets.get("examples", {"LLAMA_EXAMPLE_COMMON"})
        for_server = bool(examples & {"LLAMA_EXAMPLE_COMMON", "LLAMA_EXAMPLE_SERVER"})
        for_server = for_server and "LLAMA_EXAMPLE_SERVER" not in sets.get("excludes", set())
        if "arg_removed(" in block:
            status = Status.REMOVED
        else:
            status = Status.DECLARED if for_server else Status.OTHER_PROGRAM
        found.update(dict.fromkeys((n for n in names if n.startswith("-")), status))
    return found


# ----------------------------------------------------------------------------- the one version table
ENGINE_SOURCES: dict[str, EngineSource] = {
    "vllm": EngineSource(
        dist="vllm",
        version="0.25.0",
        package_type="sdist",
        files=(VLLM_ARGS, VLLM_FRONTEND),
        parse=parse_vllm,
        program="vllm serve",
    ),
    "sglang": EngineSource(
        dist="sglang",
        version="0.5.19",
        package_type="wheel",  # no sdist on PyPI; every wheel carries the same Python sources
        files=(SGLANG_ARGS, SGLANG_DERIVE),
        parse=parse_sglang,
        program="python3 -m sglang.launch_server",
    ),
    # The image's `server` tag follows llama.cpp's master branch, so no release can be derived from
    # it. llama-cpp-python vendors llama.cpp; its 0.3.36 sdist carries llama.cpp 0c1e57098, the
    # newest llama.cpp on PyPI when this was checked. Re-check on a new llama-cpp-python release.
    "llamacpp": EngineSource(
        dist="llama-cpp-python",
        version="0.3.36",
        package_type="sdist",
        files=(LLAMACPP_ARGS,),
        parse=parse_llamacpp,
        program="llama-server",
        floating_tag="server",
    ),
}
"""Backend plugin name -> the engine release its rendered options are checked against."""

UNCHECKED: dict[str, str] = {
    "ollama": "configured through environment variables; its only command line is `ollama serve`",
    "tgi": "a Rust launcher that is on neither PyPI nor crates.io, so its source is not fetchable here",
    "tensorrt-llm": "its PyPI project is a stub that downloads the wheel from NVIDIA's own index",
}
"""Bundled backend plugins whose options are not checked, and why."""

_IMAGE_VERSION = re.compile(r"v?(\d+(?:\.\d+)+)(?:-[A-Za-z0-9.]+)?")


def pypi_version_of_image(tag: str) -> str | None:
    """The engine release an image tag is built from: ``v0.25.0`` -> ``0.25.0``, ``v0.5.19-cu129``
    -> ``0.5.19``; ``None`` for a tag that names no release (``server``, ``latest``)."""
    match = _IMAGE_VERSION.fullmatch(tag)
    return match.group(1) if match else None


# ------------------------------------------------------------------------------------- fetching
def cache_root() -> Path:
    default = Path.home() / ".cache" / "llmaz" / "engine-sources"
    return Path(os.environ.get("LLMAZ_ENGINE_SOURCES_CACHE", default))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release_file(source: EngineSource) -> tuple[str, str, str]:
    """(file name, URL, sha256) of the release file to read, from the simple index."""
    url = f"{INDEX}/{_normal(source.dist)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            listing = json.load(response)
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
        raise EngineSourceError(f"cannot list {source.pin} at {url}: {exc}") from exc
    candidates = []
    for entry in listing.get("files", []):
        name: str = entry["filename"]
        if source.package_type == "sdist" and name.endswith(".tar.gz"):
            dist, _, version = name.removesuffix(".tar.gz").rpartition("-")
        elif source.package_type == "wheel" and name.endswith(".whl"):
            dist, version = name.split("-")[:2]
        else:
            continue
        if _normal(dist) == _normal(source.dist) and version == source.version:
            candidates.append((entry.get("size", 0), name, entry["url"], entry["hashes"]["sha256"]))
    if not candidates:
        raise EngineSourceError(f"{url} lists no {source.package_type} of {source.pin}")
    _, name, file_url, sha256 = min(candidates)  # any one: they carry the same Python sources
    return name, file_url, sha256


def _download(url: str, into: IO[bytes], sha256: str, pin: str) -> None:
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                into.write(chunk)
    except (OSError, http.client.HTTPException) as exc:
        raise EngineSourceError(f"cannot download {pin} from {url}: {exc}") from exc
    if digest.hexdigest() != sha256:
        raise EngineSourceError(f"{pin} from {url}: sha256 {digest.hexdigest()}, the index says {sha256}")
    into.flush()
    into.seek(0)


def _members(archive: Path, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """The wanted files of a wheel (paths as they are) or an sdist (under its top directory)."""
    found: dict[str, bytes] = {}
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as wheel:
            for path in set(wanted) & set(wheel.namelist()):
                found[path] = wheel.read(path)
        return found
    with tarfile.open(archive, "r:gz") as sdist:
        for member in sdist:
            path = member.name.partition("/")[2]
            if path in wanted and member.isfile() and (data := sdist.extractfile(member)):
                found[path] = data.read()
                if len(found) == len(wanted):
                    break
    return found


def fetch_sources(source: EngineSource, cache: Path | None = None) -> dict[str, str]:
    """The source's files, from the cache or else downloaded from PyPI (verified against the index's
    sha256) into it. Release files never change, so the cache is keyed by distribution and version
    and never expires; it is written to a temporary directory and renamed into place, so an
    interrupted download leaves no half cache. Raises :class:`EngineSourceError` on any failure."""
    root = cache or cache_root()
    final = root / f"{_normal(source.dist)}-{source.version}"
    if not all((final / path).is_file() for path in source.files):
        root.mkdir(parents=True, exist_ok=True)
        name, url, sha256 = _release_file(source)
        with tempfile.TemporaryDirectory(dir=root, prefix=".partial-") as tmp:
            archive = Path(tmp) / name
            with archive.open("w+b") as out:
                _download(url, out, sha256, source.pin)
            found = _members(archive, source.files)
            missing = sorted(set(source.files) - set(found))
            if missing:
                raise EngineSourceError(f"{name} ({url}) has no {', '.join(missing)}: update ENGINE_SOURCES")
            staged = Path(tmp) / "files"
            for path, data in found.items():
                (staged / path).parent.mkdir(parents=True, exist_ok=True)
                (staged / path).write_bytes(data)
            (staged / "SOURCE").write_text(f"{url}\nsha256 {sha256}\n")
            shutil.rmtree(final, ignore_errors=True)  # an older cache entry with fewer files
            try:
                staged.rename(final)
            except OSError:  # another run put it there first: same release, same files
                if not all((final / path).is_file() for path in source.files):
                    raise
    return {path: (final / path).read_text(encoding="utf-8") for path in source.files}


def declared_options(source: EngineSource, cache: Path | None = None) -> Declared:
    """The options the engine release declares (fetched on first use)."""
    return Declared(source.parse(fetch_sources(source, cache)))


# ------------------------------------------------------------------------ what the plugins render
@dataclass(frozen=True)
class RenderedOption:
    where: str
    """``config <name>``, ``multi-host leader``/``worker`` or the class variable naming the flag."""
    flag: str


_SHELL_OPERATORS = {";", "&&", "||", "|", "&", ";;"}
_NEGATIVE_NUMBER = re.compile(r"-\d")


def _engine_invocations(program: list[str], args: list[str], engine: list[str]) -> list[list[str]]:
    """The argument lists the engine gets: all of ``args`` when ``program`` is the engine (or the
    image entrypoint, for an engine without a command); in a ``sh -c`` script, the words after each
    ``<engine command>`` up to the next shell operator."""
    if program == engine:
        return [args]
    if not (len(program) == 2 and program[0].endswith("sh") and program[1] == "-c" and args and engine):
        return []
    lexer = shlex.shlex(args[0], posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    words = list(lexer)
    found = []
    for i in range(len(words) - len(engine) + 1):
        if words[i : i + len(engine)] == engine:
            rest = words[i + len(engine) :]
            end = next((j for j, w in enumerate(rest) if w in _SHELL_OPERATORS), len(rest))
            found.append(rest[:end])
    return found


def _options(words: list[str]) -> Iterator[str]:
    for word in words:
        if word.startswith("-") and word not in ("-", "--") and not _NEGATIVE_NUMBER.match(word):
            yield word.split("=", 1)[0]


def rendered_options(backend: Backend) -> tuple[list[RenderedOption], list[str]]:
    """Every option the backend renders for its engine, and the places that should reach the engine
    but where no engine invocation was found (a recommended config, a multi-host leader)."""
    engine = backend.command() or []
    found: list[RenderedOption] = []
    lost: list[str] = []
    for where, (program, args) in rendered_commands(backend).items():
        invocations = _engine_invocations(program, args, engine)
        if not invocations and where != "multi-host worker":  # a worker may run another program (ray)
            lost.append(where)
        found += [RenderedOption(where, flag) for words in invocations for flag in _options(words)]
    for attribute in ("tensor_parallel_flag", "model_name_flag"):
        flag = getattr(backend, attribute)
        if flag:
            found.append(RenderedOption(attribute, flag))
    return found, lost


def undeclared(backend: Backend, source: EngineSource, declared: Declared) -> list[str]:
    """One line per rendered option the engine release does not accept as declared (empty: all good)."""
    options, lost = rendered_options(backend)
    engine = " ".join(backend.command() or []) or "image entrypoint"
    problems = [f"backend {backend.name!r} {where}: no `{engine}` invocation found" for where in lost]
    for option in options:
        status = declared.options.get(option.flag)
        if status is Status.DECLARED:
            continue
        nearest = ", ".join(declared.nearest(option.flag)) or "none"
        problems.append(
            f"backend {backend.name!r} {option.where}: {option.flag} is {status or 'not declared'} "
            f"in {source.program} of {source.pin} (nearest declared: {nearest})"
        )
    return problems
