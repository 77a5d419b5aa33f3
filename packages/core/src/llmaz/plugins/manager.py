"""A typed facade over pluggy that loads, checks and collects llmaz plugins.

Build one explicitly (the operator does it at start-up and keeps it in its memo; the CLI per call)::

    plugins = PluginManager.from_environment()
    plugins.backends["vllm"].backend_runtime()
    for error in plugins.errors:
        print(error)            # one line per broken plugin, naming it

Load policy: plugins are the entry points of group ``llmaz`` (first-party ones too). A plugin that
fails to import, declares an incompatible plugin API, implements unknown hooks, raises in a hook,
registers a name twice or produces an invalid object is skipped with exactly one
:class:`PluginLoadError` naming it (entry-point name and distribution); the others keep working.

Environment:

* ``LLMAZ_DISABLED_PLUGINS``: comma-separated entry-point names never to load.
* ``LLMAZ_DISABLE_PLUGIN_AUTOLOAD``: when true (``1``/``true``/``yes``), entry points are not loaded;
  only plugins passed to :meth:`PluginManager.register` are used.
* ``LLMAZ_TRACE_PLUGINS``: when true, every hook call is logged on logger ``llmaz.plugins.trace``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

import pluggy

from llmaz.api.conventions import is_dns_label
from llmaz.errors import LlmazError
from llmaz.plugins import hookspecs
from llmaz.plugins.autoscaler import Autoscaler
from llmaz.plugins.backend import DEFAULT_CONFIG, Backend
from llmaz.plugins.hookspecs import PROJECT_NAME
from llmaz.plugins.registry import AutoscalerRegistry, BackendRegistry, CommandRegistry, RegistrationError

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_API_VERSION",
    "PluginInfo",
    "PluginLoadError",
    "PluginManager",
    "api_version_compatible",
]

log = logging.getLogger("llmaz.plugins")
trace_log = logging.getLogger("llmaz.plugins.trace")

PLUGIN_API_VERSION = "1"
"""Version of the plugin API this host implements. Plugins declare what they support in a module
attribute ``LLMAZ_PLUGIN_API``: a version (``"1"``) or comma-separated constraints (``">=1,<3"``)."""

PLUGIN_API_ATTRIBUTE = "LLMAZ_PLUGIN_API"
ENTRY_POINT_GROUP = PROJECT_NAME

SOURCE_URL_LABEL = "Source"
"""A plugin distribution is ``builtin`` when its ``Project-URL: Source`` equals the ``llmaz``
distribution's (every package of this repository declares the same one); any other is
``third-party``. Core names no plugin distribution: the origin comes from the packages' metadata."""

ENV_DISABLED = "LLMAZ_DISABLED_PLUGINS"
ENV_NO_AUTOLOAD = "LLMAZ_DISABLE_PLUGIN_AUTOLOAD"
ENV_TRACE = "LLMAZ_TRACE_PLUGINS"

_CONSTRAINT = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*(\d+)\s*$")

_KIND_HOOKS = (
    ("backend", "llmaz_register_backends"),
    ("autoscaler", "llmaz_register_autoscalers"),
    ("commands", "llmaz_register_commands"),
)
"""The kind a plugin shows in ``llmaz plugins list``, from the registration hooks it implements."""


def _source_url(dist: metadata.Distribution | None) -> str | None:
    if dist is None or not dist.metadata:
        return None
    for entry in dist.metadata.get_all("Project-URL") or []:
        label, _, url = str(entry).partition(",")
        if label.strip() == SOURCE_URL_LABEL:
            return url.strip()
    return None


def _core_source_url() -> str | None:
    try:
        return _source_url(metadata.distribution(PROJECT_NAME))
    except metadata.PackageNotFoundError:
        return None


Origin = Literal["builtin", "third-party", "local"]
Status = Literal["loaded", "blocked", "error"]
Stage = Literal["import", "api-version", "register", "collect", "validate"]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def parse_name_list(value: str | None) -> set[str]:
    """``"a, b,,c"`` -> ``{"a", "b", "c"}``."""
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def api_version_compatible(declared: object, host: str = PLUGIN_API_VERSION) -> bool:
    """Whether a plugin's ``LLMAZ_PLUGIN_API`` declaration admits the host's plugin API version.

    Accepted forms: ``"1"`` (exactly 1), ``">=1"``, ``">=1,<3"``, an int, or a list/tuple of those
    (any one matching is enough).
    """
    if isinstance(declared, (list, tuple)):
        return any(api_version_compatible(item, host) for item in declared)
    if isinstance(declared, bool) or not isinstance(declared, (str, int)):
        raise ValueError(f"{PLUGIN_API_ATTRIBUTE} must be a string such as '1' or '>=1,<3'")
    version = int(host)
    clauses = str(declared).split(",")
    for clause in clauses:
        match = _CONSTRAINT.match(clause)
        if not match:
            raise ValueError(f"cannot parse {PLUGIN_API_ATTRIBUTE} constraint {clause.strip()!r}")
        op, number = match.group(1) or "==", int(match.group(2))
        ok = {
            "==": version == number,
            "!=": version != number,
            ">=": version >= number,
            "<=": version <= number,
            ">": version > number,
            "<": version < number,
        }[op]
        if not ok:
            return False
    return True


@dataclass
class PluginInfo:
    """One plugin as the host sees it (a row of ``llmaz plugins list``)."""

    name: str
    distribution: str | None = None
    version: str | None = None
    origin: Origin = "local"
    status: Status = "loaded"
    backends: list[str] = field(default_factory=list)
    autoscalers: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    error: str | None = None
    hooks: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``backend``, ``autoscaler``, ``commands``, joined with ``+`` (``autoscaler+commands``), or
        ``-`` (from the registration hooks implemented)."""
        kinds = [k for k, hook in _KIND_HOOKS if hook in self.hooks]
        return "+".join(kinds) or "-"

    def describe(self) -> str:
        """``'foo' (distribution llmaz-backend-foo 1.2)``."""
        if self.distribution:
            dist = f"{self.distribution} {self.version}" if self.version else self.distribution
            return f"plugin {self.name!r} (distribution {dist})"
        return f"plugin {self.name!r}"


@dataclass
class PluginLoadError(LlmazError):
    """Why one plugin was skipped. ``str()`` gives one line naming the plugin.

    The manager collects these (:attr:`PluginManager.errors`) instead of raising them, so one broken
    plugin never stops the others; a caller that wants to fail on the first one can ``raise`` it.
    """

    plugin: str
    distribution: str | None
    version: str | None
    stage: Stage
    message: str

    __hash__ = LlmazError.__hash__

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        info = PluginInfo(self.plugin, self.distribution, self.version)
        return f"{info.describe()} skipped at {self.stage}: {self.message}"


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(text) > 1:
        first += f" (+{len(text) - 1} more lines)"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class PluginManager:
    """Typed facade over :class:`pluggy.PluginManager` for the ``llmaz`` project.

    :param autoload: load entry points in :meth:`load`; default from ``LLMAZ_DISABLE_PLUGIN_AUTOLOAD``.
    :param disabled: entry-point names to block; default from ``LLMAZ_DISABLED_PLUGINS``.
    :param trace: log every hook call; default from ``LLMAZ_TRACE_PLUGINS``.
    :param environ: the environment to read the defaults from (``os.environ`` when ``None``).
    """

    def __init__(
        self,
        *,
        autoload: bool | None = None,
        disabled: Iterable[str] | None = None,
        trace: bool | None = None,
        environ: Mapping[str, str] | None = None,
        check_rules: bool = True,
        commands: bool = True,
    ) -> None:
        env = os.environ if environ is None else environ
        self.with_commands = commands
        """Whether :meth:`collect` asks the plugins for their ``llmaz`` commands. The operator does
        not: a plugin's commands bring its command-line dependencies into the process (``llmaz
        demo`` its rich live display), memory the operator would carry for nothing (issue 15)."""
        self.check_rules = check_rules
        """Whether a backend's BackendRuntime must also pass the CRD's CEL rules offline to be
        accepted. The operator turns it off: the API server checks them when it applies the object,
        and the offline CEL interpreter (cel-python and its grammar) is ~11 MB of its memory."""
        self.autoload = (not _truthy(env.get(ENV_NO_AUTOLOAD))) if autoload is None else autoload
        self.disabled: frozenset[str] = frozenset(
            parse_name_list(env.get(ENV_DISABLED)) if disabled is None else disabled
        )
        self.trace = _truthy(env.get(ENV_TRACE)) if trace is None else trace
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        for name in sorted(self.disabled):
            self._pm.set_blocked(name)
        if self.trace:
            self._pm.add_hookcall_monitoring(self._before_hook, self._after_hook)
        self._infos: dict[str, PluginInfo] = {}
        self._load_errors: list[PluginLoadError] = []
        self._collect_errors: list[PluginLoadError] = []
        self.backends: dict[str, Backend] = {}
        self.autoscalers: dict[str, Autoscaler] = {}
        self.commands: dict[str, Callable[..., Any]] = {}
        """``llmaz`` commands contributed by plugins (name -> ``typer.Typer`` or function)."""
        self._backend_owner: dict[str, str] = {}
        self._autoscaler_owner: dict[str, str] = {}
        self._command_owner: dict[str, str] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *, check_rules: bool = True, commands: bool = True
    ) -> PluginManager:
        """A manager configured from the environment with entry points loaded and collected."""
        manager = cls(environ=environ, check_rules=check_rules, commands=commands)
        manager.load()
        return manager

    def load(self) -> None:
        """Load the ``llmaz`` entry points (unless autoload is off), then :meth:`collect`."""
        if self.autoload:
            self.load_entry_points()
        self.collect()

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Import and register every entry point of ``group``; failures become :attr:`errors`."""
        seen: dict[str, str] = {}
        core_source = _core_source_url()
        for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
            dist_name, dist_version = self._dist_of(ep)
            if ep.name in seen:
                if seen[ep.name] != ep.value:
                    self._record_load_error(
                        ep.name,
                        distribution=dist_name,
                        version=dist_version,
                        stage="register",
                        message=f"entry point name already used by {seen[ep.name]!r}",
                    )
                continue
            seen[ep.name] = ep.value
            source = _source_url(getattr(ep, "dist", None))
            origin: Origin = "builtin" if source is not None and source == core_source else "third-party"
            if ep.name in self.disabled:
                self._infos[ep.name] = PluginInfo(ep.name, dist_name, dist_version, origin, status="blocked")
                log.info("plugin %r blocked by %s", ep.name, ENV_DISABLED)
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must never take the host down
                self._record_load_error(
                    ep.name,
                    distribution=dist_name,
                    version=dist_version,
                    stage="import",
                    message=_exc_text(exc),
                    origin=origin,
                )
                log.debug("import of plugin %r failed", ep.name, exc_info=True)
                continue
            self.register(plugin, name=ep.name, distribution=dist_name, version=dist_version, origin=origin)

    @staticmethod
    def _dist_of(ep: metadata.EntryPoint) -> tuple[str | None, str | None]:
        dist = getattr(ep, "dist", None)
        if dist is None:
            return None, None
        name = dist.metadata["Name"] if dist.metadata else None
        normalized = re.sub(r"[-_.]+", "-", name).lower() if name else None
        return normalized, dist.version

    def register(
        self,
        plugin: object,
        *,
        name: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
        origin: Origin = "local",
        check_api: bool = True,
    ) -> bool:
        """Register one plugin object (usually a module). Returns whether it was accepted.

        Checks its declared plugin API (``LLMAZ_PLUGIN_API``; skip with ``check_api=False``), that it
        implements at least one known hook and no unknown ``llmaz_*`` hook. Call :meth:`collect`
        afterwards (``load`` does) to refresh :attr:`backends` and :attr:`autoscalers`.
        """
        plugin_name = name or getattr(plugin, "__name__", None) or repr(plugin)
        if plugin_name in self.disabled:
            self._infos[plugin_name] = PluginInfo(
                plugin_name, distribution, version, origin, status="blocked"
            )
            return False

        def fail(stage: Stage, message: str) -> bool:
            self._record_load_error(
                plugin_name,
                distribution=distribution,
                version=version,
                stage=stage,
                message=message,
                origin=origin,
            )
            return False

        if check_api:
            declared = getattr(plugin, PLUGIN_API_ATTRIBUTE, None)
            if declared is None:
                return fail(
                    "api-version",
                    f"does not declare {PLUGIN_API_ATTRIBUTE} (this host implements plugin API "
                    f"{PLUGIN_API_VERSION})",
                )
            try:
                compatible = api_version_compatible(declared)
            except ValueError as exc:
                return fail("api-version", str(exc))
            if not compatible:
                return fail(
                    "api-version",
                    f"supports plugin API {declared!r} but this host implements {PLUGIN_API_VERSION}",
                )
        if plugin_name in self._infos and self._infos[plugin_name].status == "loaded":
            return fail("register", "a plugin with this name is already registered")
        try:
            self._pm.register(plugin, name=plugin_name)
        except Exception as exc:  # pluggy validation (bad hook signature) or duplicate object
            return fail("register", _exc_text(exc))
        callers = self._pm.get_hookcallers(plugin) or []
        unknown = sorted(
            impl.function.__name__
            for caller in callers
            if not caller.has_spec()
            for impl in caller.get_hookimpls()
            if impl.plugin is plugin and not impl.opts.get("optionalhook")
        )
        hooks = sorted(c.name for c in callers if c.has_spec())
        if unknown or not hooks:
            self._pm.unregister(plugin)
            if unknown:
                return fail("register", f"implements unknown hook(s) {', '.join(unknown)}")
            return fail("register", "implements no llmaz hook (forgot @llmaz.plugins.hookimpl?)")
        self._infos[plugin_name] = PluginInfo(plugin_name, distribution, version, origin, hooks=hooks)
        return True

    # ------------------------------------------------------------------ collection
    def collect(self) -> None:
        """Call the registration hooks plugin by plugin and validate what each contributes."""
        self.backends = {}
        self.autoscalers = {}
        self.commands = {}
        self._backend_owner = {}
        self._autoscaler_owner = {}
        self._command_owner = {}
        self._collect_errors = []
        for info in list(self._infos.values()):
            if info.status == "blocked" or (info.status == "error" and info.error and not info.hooks):
                continue
            plugin = self._pm.get_plugin(info.name)
            if plugin is None:
                continue
            info.status, info.error = "loaded", None
            error = self._collect_one(info, plugin)
            if error is not None:
                stage, message = error
                info.status, info.error = "error", message
                info.backends, info.autoscalers, info.commands = [], [], []
                err = PluginLoadError(info.name, info.distribution, info.version, stage, message)
                self._collect_errors.append(err)
                log.error("%s", err)

    def _subset_call(self, plugin: object, hook: str, **kwargs: Any) -> None:
        others = [p for p in self._pm.get_plugins() if p is not plugin]
        self._pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)

    def _collect_one(self, info: PluginInfo, plugin: object) -> tuple[Stage, str] | None:
        backends = BackendRegistry()
        autoscalers = AutoscalerRegistry()
        commands = CommandRegistry()
        try:
            if "llmaz_register_backends" in info.hooks:
                self._subset_call(plugin, "llmaz_register_backends", register=backends)
            if "llmaz_register_autoscalers" in info.hooks:
                self._subset_call(plugin, "llmaz_register_autoscalers", register=autoscalers)
            if self.with_commands and "llmaz_register_commands" in info.hooks:
                self._subset_call(plugin, "llmaz_register_commands", register=commands)
        except RegistrationError as exc:
            return "collect", str(exc)
        except Exception as exc:
            return "collect", f"registration hook raised {_exc_text(exc)}"
        for backend in backends.items:
            problem = self._validate_backend(backend, check_rules=self.check_rules)
            if problem:
                return "validate", problem
        for autoscaler in autoscalers.items:
            problem = self._validate_autoscaler(autoscaler)
            if problem:
                return "validate", problem
        for backend in backends.items:
            if backend.name in self.backends:
                owner = self._infos[self._backend_owner[backend.name]]
                return "collect", f"backend {backend.name!r} is already registered by {owner.describe()}"
        for autoscaler in autoscalers.items:
            if autoscaler.name in self.autoscalers:
                owner = self._infos[self._autoscaler_owner[autoscaler.name]]
                return (
                    "collect",
                    f"autoscaler {autoscaler.name!r} is already registered by {owner.describe()}",
                )
        for taken in commands.items:
            if taken in self.commands:
                owner = self._infos[self._command_owner[taken]]
                return "collect", f"command {taken!r} is already registered by {owner.describe()}"
        for backend in backends.items:
            self.backends[backend.name] = backend
            self._backend_owner[backend.name] = info.name
        for autoscaler in autoscalers.items:
            self.autoscalers[autoscaler.name] = autoscaler
            self._autoscaler_owner[autoscaler.name] = info.name
        info.backends = [b.name for b in backends.items]
        info.autoscalers = [a.name for a in autoscalers.items]
        for command_name, command in commands.items.items():
            self.commands[command_name] = command
            self._command_owner[command_name] = info.name
        info.commands = list(commands.items)
        return None

    @staticmethod
    def _validate_backend(backend: Backend, *, check_rules: bool) -> str | None:
        label = f"backend {backend.name!r}"
        if not is_dns_label(backend.name):
            return f"{label}: name must be a DNS label (lowercase letters, digits, '-')"
        try:
            runtime = backend.backend_runtime(check_rules=check_rules)
        except Exception as exc:
            return f"{label} produced an invalid BackendRuntime: {_exc_text(exc)}"
        names = [c.name for c in runtime.spec.recommended_configs or []]
        if DEFAULT_CONFIG not in names:
            return f"{label} has no {DEFAULT_CONFIG!r} recommended config"
        if len(names) != len(set(names)):
            return f"{label} has duplicate recommended config names {names}"
        return None

    @staticmethod
    def _validate_autoscaler(autoscaler: Autoscaler) -> str | None:
        label = f"autoscaler {autoscaler.name!r}"
        if not is_dns_label(autoscaler.name):
            return f"{label}: name must be a DNS label (lowercase letters, digits, '-')"
        for pair in autoscaler.managed_kinds:
            if not (
                isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)
            ):
                return f"{label}: managed_kinds must hold (apiVersion, kind) pairs, got {pair!r}"
        return None

    def _record_load_error(
        self,
        name: str,
        *,
        distribution: str | None,
        version: str | None,
        stage: Stage,
        message: str,
        origin: Origin = "third-party",
    ) -> None:
        err = PluginLoadError(name, distribution, version, stage, message)
        self._load_errors.append(err)
        self._infos.setdefault(name, PluginInfo(name, distribution, version, origin))
        info = self._infos[name]
        if info.status != "loaded" or not info.hooks:
            info.status, info.error = "error", message
        log.error("%s", err)

    # ------------------------------------------------------------------ queries
    @property
    def errors(self) -> list[PluginLoadError]:
        """One entry per skipped plugin, load-time errors first."""
        return [*self._load_errors, *self._collect_errors]

    @property
    def plugins(self) -> list[PluginInfo]:
        """Every plugin seen, loaded, blocked or broken, in load order."""
        return list(self._infos.values())

    def get_backend(self, name: str) -> Backend | None:
        return self.backends.get(name)

    def get_autoscaler(self, name: str) -> Autoscaler | None:
        return self.autoscalers.get(name)

    def owner_of_backend(self, name: str) -> PluginInfo | None:
        owner = self._backend_owner.get(name)
        return self._infos.get(owner) if owner else None

    def owner_of_command(self, name: str) -> PluginInfo | None:
        owner = self._command_owner.get(name)
        return self._infos.get(owner) if owner else None

    def owner_of_autoscaler(self, name: str) -> PluginInfo | None:
        owner = self._autoscaler_owner.get(name)
        return self._infos.get(owner) if owner else None

    def check_pending(self) -> None:
        """Raise :class:`pluggy.PluginValidationError` if a registered plugin implements an unknown hook.

        :meth:`register` already rejects such plugins one by one, so this only fails when pluggy was
        used behind the facade's back.
        """
        self._pm.check_pending()

    def unregister(self, name: str) -> None:
        """Remove a plugin (tests use it); call :meth:`collect` afterwards."""
        if self._pm.get_plugin(name) is not None:
            self._pm.unregister(name=name)
        self._infos.pop(name, None)

    # ------------------------------------------------------------------ tracing
    @staticmethod
    def _before_hook(
        hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
    ) -> None:
        trace_log.info("call %s -> %s", hook_name, [impl.plugin_name for impl in hook_impls])

    @staticmethod
    def _after_hook(
        outcome: pluggy.Result[Any],
        hook_name: str,
        hook_impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        exc = outcome.exception
        trace_log.info("done %s%s", hook_name, f" raised {exc!r}" if exc else "")
