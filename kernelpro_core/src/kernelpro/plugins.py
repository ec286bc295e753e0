"""The plugin manager and the façade core code uses to reach plugins.

Plugins are modules (or objects) registered under the pluggy project ``kernelpro``. They
are discovered through the ``kernelpro`` entry-point group; KernelPro's own built-ins
register through that same group. Core code never calls ``pm.hook`` directly: it asks a
:class:`Plugins` instance for named things (``plugins.generator("anthropic")``).

Control:
- ``KERNELPRO_BLOCK_PLUGINS=a,b`` (and config ``plugins.block``) skips entry points by name.
- ``KERNELPRO_LOAD_PLUGINS=a,b`` loads only those entry points (built-ins included, so
  name the ``core_*`` ones you need).
- A plugin that fails to import is recorded with its distribution and error and reported
  on stderr by the CLI; it is never swallowed.
- A hook implementation whose name starts with ``kernelpro_`` but matches no hook
  specification fails at start-up (:class:`PluginError`).
- A registration hook that raises is recorded (:attr:`Plugins.hook_failures`, one warning
  line each) and what it registered in that call is left out; the other plugins work.
- A name registered twice is recorded (:attr:`Plugins.conflicts`); every lookup then
  raises :class:`PluginError` with one line naming both providers (:meth:`Plugins.check`).
- A plugin that raises while a command runs ends in :class:`PluginFailed`, one line.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from typing import Any, Callable, Iterable

import attrs
import pluggy

from kernelpro import gpus, hookspecs
from kernelpro.api import (
    Analyzer,
    ArchHeuristic,
    BottleneckClassifier,
    Collector,
    Executor,
    Generator,
    LLMTool,
    Measurement,
    MicroProfiler,
    Reward,
    SearchPolicy,
    api_version_problem,
)
from kernelpro.records import GpuSpec

GROUP = "kernelpro"
BLOCK_ENV = "KERNELPRO_BLOCK_PLUGINS"
LOAD_ENV = "KERNELPRO_LOAD_PLUGINS"

# kind -> (hook name, human name, where a user finds more)
KINDS: dict[str, tuple[str, str]] = {
    "generator": ("kernelpro_register_generators", "code generator"),
    "search": ("kernelpro_register_search_policies", "search policy"),
    "reward": ("kernelpro_register_rewards", "reward"),
    "classifier": ("kernelpro_register_classifiers", "bottleneck classifier"),
    "micro_profiler": ("kernelpro_register_micro_profilers", "micro-profiler"),
    "collector": ("kernelpro_register_collectors", "collector"),
    "analyzer": ("kernelpro_register_analyzers", "analyzer"),
    "measurement": ("kernelpro_register_measurements", "measurement"),
    "heuristic": ("kernelpro_register_heuristics", "architecture heuristic"),
    "llm_tool": ("kernelpro_register_llm_tools", "LLM tool"),
    "executor": ("kernelpro_register_executors", "executor"),
}

# kind -> the class of kernelpro.api a registered class must subclass
BASES: dict[str, type] = {
    "generator": Generator, "search": SearchPolicy, "reward": Reward, "classifier": BottleneckClassifier,
    "micro_profiler": MicroProfiler, "collector": Collector, "analyzer": Analyzer, "measurement": Measurement,
    "heuristic": ArchHeuristic, "llm_tool": LLMTool, "executor": Executor,
}

# Names whose plugin usually comes from a separate distribution, for hints.
HINTS = {
    "roofline": "kernelpro-plugins-ncu",
    "ncu": "kernelpro-plugins-ncu",
    "sass": "kernelpro-plugins-sass",
    "timeline": "kernelpro-plugins-nsys",
    "energy": "kernelpro-plugins-energy",
    "energy_at_matched_speed": "kernelpro-plugins-energy",
    "expert": "kernelpro-plugins-expert",
}


class PluginError(Exception):
    """A plugin problem that stops start-up; the message is one line."""


class UnknownName(PluginError):
    pass


class PluginFailed(PluginError):
    """A plugin raised in one of its hooks or methods while a command ran. The message is
    one line naming the plugin, the hook or method, and the error; the caller adds what
    the user should do next, which depends on the command."""

    def __init__(self, what: str, hook: str, exc: BaseException, plugin: str | None = None) -> None:
        self.plugin = plugin
        self.hook = hook
        super().__init__(f"{what} failed in {hook}: {type(exc).__name__}: {_first_line(str(exc))}")

    @classmethod
    def from_line(cls, line: str, hook: str = "") -> "PluginFailed":
        """The failure as another process reported it (its one line)."""
        failed = cls.__new__(cls)
        PluginError.__init__(failed, line)
        failed.plugin, failed.hook = None, hook
        return failed


@attrs.frozen
class HookFailure:
    """A registration hook that raised: what the plugin registered in that call is left out."""

    plugin: str
    distribution: str | None
    hook: str
    error: str

    def line(self) -> str:
        return (f"plugin {self.plugin!r} from {self.distribution or '?'} failed in {self.hook}: {self.error}; "
                f"what it registers there is left out (fix or uninstall it, or block it with "
                f"{BLOCK_ENV}={self.plugin})")


@attrs.frozen
class Registration:
    kind: str
    name: str
    obj: Any
    plugin: str  # plugin (entry point) name that registered it
    distribution: str | None


@attrs.frozen
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    module: str
    hooks: tuple[str, ...]
    error: str | None = None  # set when the plugin failed to load
    blocked: bool = False


def _split_env(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def _print_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class Plugins:
    """Loads plugins once and answers questions about what they registered."""

    def __init__(
        self,
        block: Iterable[str] = (),
        extra: Iterable[tuple[str, Any]] = (),
        entry_points: bool = True,
    ) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.infos: list[PluginInfo] = []
        self._dist_of: dict[str, tuple[str | None, str | None]] = {}
        blocked = set(block) | (_split_env(BLOCK_ENV) or set())
        only = _split_env(LOAD_ENV)
        if entry_points:
            self._load_entry_points(blocked, only)
        extra = list(extra)
        for name, obj in extra:
            incompatible = _api_problem(obj)
            if incompatible is not None:
                raise PluginError(f"plugin {name!r}: {incompatible}")
            self.pm.register(obj, name=name)
            self._dist_of[name] = (None, None)
            self.infos.append(
                PluginInfo(name=name, distribution=None, version=None,
                           module=getattr(obj, "__name__", repr(obj)), hooks=self._hooks_of(name))
            )
        self._check_hooks(entry_point_names=set(self._dist_of) - {n for n, _ in extra})
        self._registry: dict[str, dict[str, Registration]] | None = None
        self._gpu_specs: list[tuple[GpuSpec, str]] | None = None
        #: warnings so far (duplicate or tied GPU specs, a failing GPU-spec hook)
        self.warnings: list[str] = []
        self.on_warning: Callable[[str], None] = _print_warning
        #: registration hooks that raised (reported as warnings; the rest of the plugins work)
        self.hook_failures: list[HookFailure] = []
        #: (kind, name) -> every registration of a name registered more than once
        self.conflicts: dict[tuple[str, str], list[Registration]] = {}
        if entry_points:  # a misspelt name in the environment would otherwise do nothing, silently
            known = {i.name for i in self.infos}
            for env in (BLOCK_ENV, LOAD_ENV):
                for name in sorted((_split_env(env) or set()) - known):
                    self.warn(f"{env} names {name!r}, which is no installed plugin's entry point; "
                              f"installed: {', '.join(sorted(known))}")

    # --- loading -------------------------------------------------------------------------

    def _load_entry_points(self, blocked: set[str], only: set[str] | None) -> None:
        seen: set[str] = set()
        for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            if ep.name in blocked or (only is not None and ep.name not in only):
                self.infos.append(PluginInfo(name=ep.name, distribution=dist_name, version=version,
                                             module=ep.value, hooks=(), blocked=True))
                continue
            try:
                obj = ep.load()
                incompatible = _api_problem(obj)
                if incompatible is None:
                    self.pm.register(obj, name=ep.name)
            except Exception as exc:  # reported, never swallowed
                err = f"{type(exc).__name__}: {_error_text(exc)}"
                self.infos.append(PluginInfo(name=ep.name, distribution=dist_name, version=version,
                                             module=ep.value, hooks=(), error=err))
                continue
            if incompatible is not None:  # left out, reported like an import failure
                self.infos.append(PluginInfo(name=ep.name, distribution=dist_name, version=version,
                                             module=ep.value, hooks=(), error=incompatible))
                continue
            self._dist_of[ep.name] = (dist_name, version)
            self.infos.append(PluginInfo(name=ep.name, distribution=dist_name, version=version,
                                         module=ep.value, hooks=self._hooks_of(ep.name)))

    def _check_hooks(self, entry_point_names: set[str]) -> None:
        """Every hook a plugin implements must be one of the specifications (a misspelt hook
        name would otherwise never be called). An installed plugin that fails this is left out
        and reported like one that fails to import (a misspelt hook argument already is:
        pluggy refuses it at registration); one passed in directly is an error."""
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                plugin = getattr(exc, "plugin", None)
                name = (self.pm.get_name(plugin) if plugin is not None else None) or "?"
                if name not in entry_point_names:
                    raise PluginError(f"plugin {name!r}: {_error_text(exc)}") from None
                self.pm.unregister(name=name)
                self._dist_of.pop(name, None)
                error = f"PluginValidationError: {_unknown_hook_text(exc)}"
                self.infos = [attrs.evolve(i, hooks=(), error=error) if i.name == name else i for i in self.infos]

    def _hooks_of(self, name: str) -> tuple[str, ...]:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return ()
        return tuple(sorted(h.name for h in self.pm.get_hookcallers(plugin) or ()))

    @property
    def failures(self) -> list[PluginInfo]:
        return [i for i in self.infos if i.error]

    # --- registry ------------------------------------------------------------------------

    def _collect(self) -> dict[str, dict[str, Registration]]:
        """Call every registration hook once. A hook that raises is recorded in
        :attr:`hook_failures` and what it registered in that call is dropped; a name
        registered twice is recorded in :attr:`conflicts` (lookups then fail, see :meth:`check`)."""
        if self._registry is not None:
            return self._registry
        reg: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        for kind, (hook_name, human) in KINDS.items():
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                plugin_name = self.pm.get_name(impl.plugin) or "?"
                dist = self._dist_of.get(plugin_name, (None, None))[0]
                staged: list[Registration] = []

                def register(obj: Any, _kind=kind, _plugin=plugin_name, _dist=dist, _human=human,
                             _staged=staged) -> None:
                    name = getattr(obj, "name", None)
                    if not isinstance(name, str) or not name:
                        raise PluginError(f"registered a {_human} without a name: {obj!r}")
                    base = BASES.get(_kind)
                    if base is not None and not (isinstance(obj, type) and issubclass(obj, base)):
                        # core constructs it with its settings: an instance, or a class of
                        # another shape, would fail only when used, far from the plugin
                        what = f"a {type(obj).__name__} instance" if not isinstance(obj, type) else f"class {obj.__name__}"
                        raise PluginError(f"registered {name!r} as a {_human}, but it is {what}, not a subclass "
                                          f"of kernelpro.api.{base.__name__}")
                    _staged.append(Registration(_kind, name, obj, _plugin, _dist))

                try:
                    impl.function(register)
                except Exception as exc:
                    self.hook_failures.append(HookFailure(plugin_name, dist, hook_name,
                                                          f"{type(exc).__name__}: {_first_line(str(exc))}"))
                    continue
                for r in staged:
                    if r.name in reg[kind]:
                        self.conflicts.setdefault((kind, r.name), [reg[kind][r.name]]).append(r)
                    else:
                        reg[kind][r.name] = r
        self._registry = reg
        return reg

    def collect(self) -> None:
        """Run every registration hook now (GPU specs included), so that failures and
        duplicate names are known before a command starts its work."""
        self._collect()
        self.gpu_specs()

    def conflict_lines(self) -> list[str]:
        """One line per name registered twice: the kind, the name, every provider, the fix."""
        lines = []
        for (kind, name), regs in self.conflicts.items():
            providers = " and by ".join(
                f"plugin {r.plugin!r} ({r.distribution or '?'}, {getattr(r.obj, '__module__', '?')})" for r in regs
            )
            others = sorted({r.plugin for r in regs[1:]}) or [regs[-1].plugin]
            lines.append(f"{KINDS[kind][1]} {name!r} is registered twice: by {providers}; uninstall one, or block "
                         f"one with {BLOCK_ENV}={others[0]} or the config's plugins.block")
        return lines

    def check(self) -> None:
        """Raise :class:`PluginError` (one line) when a name is registered more than once:
        which of the two a command would use would depend on the installation."""
        self._collect()
        lines = self.conflict_lines()
        if lines:
            more = f" ({len(lines) - 1} more: see kernelpro plugins)" if len(lines) > 1 else ""
            raise PluginError(lines[0] + more)

    def _checked(self) -> dict[str, dict[str, Registration]]:
        self.check()
        return self._collect()

    def who(self, plugin_name: str) -> str:
        """``plugin 'p' from its-distribution`` (``plugin 'p'`` for one registered in-process),
        for messages about a hook implementation."""
        dist = self._dist_of.get(plugin_name, (None, None))[0]
        return f"plugin {plugin_name!r} from {dist}" if dist else f"plugin {plugin_name!r}"

    def provider(self, kind: str, name: str) -> str:
        """``search policy 'greedy' (plugin 'core_search' from kernelpro-core)``, for messages."""
        r = self._collect()[kind].get(name)
        where = (f" (plugin {r.plugin!r}{f' from {r.distribution}' if r.distribution else ''})" if r is not None
                 else "")
        return f"{KINDS[kind][1]} {name!r}{where}"

    def registrations(self, kind: str) -> dict[str, Registration]:
        return dict(self._checked()[kind])

    def names(self, kind: str) -> list[str]:
        return sorted(self._checked()[kind])

    def get(self, kind: str, name: str) -> Registration:
        regs = self._checked()[kind]
        if name not in regs:
            human = KINDS[kind][1]
            available = ", ".join(sorted(regs)) or "none"
            hint = f" (install {HINTS[name]})" if name in HINTS else ""
            hint += self.failed_hint(kind)
            from kernelpro.config import did_you_mean

            raise UnknownName(f"unknown {human} {name!r}{hint}{did_you_mean(name, regs)}; available: {available}")
        return regs[name]

    def failed_hint(self, kind: str) -> str:
        """For a line about an unknown name of ``kind``: the plugins whose registration hook
        of that kind raised (what they register there is left out), e.g. " (plugin 'x'
        failed in kernelpro_register_classifiers)"; "" when none did."""
        failed = [f.plugin for f in self.hook_failures if f.hook == KINDS[kind][0]]
        if not failed:
            return ""
        return f" (plugin {', '.join(repr(p) for p in failed)} failed in {KINDS[kind][0]})"

    # typed façade ------------------------------------------------------------------------
    def generator(self, name: str) -> type[Generator]:
        return self.get("generator", name).obj

    def search_policy(self, name: str) -> type[SearchPolicy]:
        return self.get("search", name).obj

    def reward(self, name: str) -> type[Reward]:
        return self.get("reward", name).obj

    def classifier(self, name: str) -> type[BottleneckClassifier]:
        return self.get("classifier", name).obj

    def micro_profilers(self) -> list[type[MicroProfiler]]:
        return [r.obj for _, r in sorted(self._checked()["micro_profiler"].items())]

    def collectors(self) -> list[type[Collector]]:
        return [r.obj for _, r in sorted(self._checked()["collector"].items())]

    def analyzers(self) -> list[type[Analyzer]]:
        return [r.obj for _, r in sorted(self._checked()["analyzer"].items())]

    def measurements(self) -> dict[str, type[Measurement]]:
        return {n: r.obj for n, r in self._checked()["measurement"].items()}

    def heuristics(self) -> list[type[ArchHeuristic]]:
        return [r.obj for _, r in sorted(self._checked()["heuristic"].items())]

    def executor(self, name: str) -> type[Executor]:
        return self.get("executor", name).obj

    def llm_tools(self) -> list[type[LLMTool]]:
        return [r.obj for _, r in sorted(self._checked()["llm_tool"].items())]

    def gpu_specs(self) -> list[tuple[GpuSpec, str]]:
        """Every registered GPU spec with the plugin that registered it, sorted by plugin
        and spec name. A name registered twice keeps the higher-priority spec (on a tie,
        the first by plugin name) and is reported as a warning naming both plugins."""
        if self._gpu_specs is None:
            found: list[tuple[GpuSpec, str]] = []
            for impl in self.pm.hook.kernelpro_register_gpu_specs.get_hookimpls():
                plugin_name = self.pm.get_name(impl.plugin) or "?"
                found.extend(self._call_gpu_spec_hook(impl, plugin_name))
            found.sort(key=lambda pair: (pair[1], pair[0].name))
            by_name: dict[str, tuple[GpuSpec, str]] = {}
            for spec, plugin_name in found:
                key = " ".join(gpus.name_tokens(spec.name))
                if key not in by_name:
                    by_name[key] = (spec, plugin_name)
                    continue
                kept, kept_by = by_name[key]
                if spec.priority > kept.priority:
                    by_name[key] = (spec, plugin_name)
                winner = by_name[key]
                self.warn(f"GPU spec {spec.name!r} is registered twice: by {kept_by!r} and by {plugin_name!r}; "
                          f"using the one from {winner[1]!r} (priority {winner[0].priority})")
            self._gpu_specs = list(by_name.values())
        return self._gpu_specs

    def _call_gpu_spec_hook(self, impl: Any, plugin_name: str) -> list[tuple[GpuSpec, str]]:
        # a broken vendor hook costs its own specs (with a warning), not the command
        specs: list[tuple[GpuSpec, str]] = []

        def register(spec: Any) -> None:
            if not isinstance(spec, GpuSpec):
                raise TypeError(f"expected a kernelpro.records.GpuSpec, got {type(spec).__name__}")
            specs.append((spec, plugin_name))

        try:
            impl.function(register)
        except Exception as exc:
            error = f"{type(exc).__name__}: {_first_line(str(exc))}"
            self.hook_failures.append(HookFailure(plugin_name, self._dist_of.get(plugin_name, (None, None))[0],
                                                  "kernelpro_register_gpu_specs", error))
            # recorded, not printed: the command reports hook failures once, with the fix
            self.warnings.append(f"plugin {plugin_name!r} failed in kernelpro_register_gpu_specs: {error}; "
                                 "its GPU specs are not used")
            return []
        return specs

    def resolve_gpu(self, device_name: str, arch: str) -> GpuSpec | None:
        """The ceilings for a device: a plugin's override (calibration), else the
        registered spec that matches it best (rule in :func:`kernelpro.gpus.choose`)."""
        first = self.call_first("kernelpro_resolve_gpu_spec", device_name=device_name, arch=arch)
        if first is not None:
            override, plugin_name = first
            if not isinstance(override, GpuSpec):  # else it fails later, blamed on whoever reads it
                raise PluginFailed(self.who(plugin_name), "kernelpro_resolve_gpu_spec",
                                   TypeError(f"returned {type(override).__name__}, expected a GpuSpec or None"),
                                   plugin=plugin_name)
            return override
        spec, warning = gpus.choose(self.gpu_specs(), device_name, arch)
        if warning:
            self.warn(warning)
        return spec

    def gpu_named(self, name: str) -> GpuSpec | None:
        """What a user's ``--gpu NAME`` (or config ``gpu``) stands for: the spec with that
        name, else the one a device of that name resolves to."""
        return gpus.named(self.gpu_specs(), name) or self.resolve_gpu(name, "")

    def gpu_for(self, device_name: str | None, arch: str = "", requested: str | None = None) -> GpuSpec | None:
        """The spec wherever a GPU is known: ``requested`` (the user's ``--gpu`` or config
        ``gpu``) when given, else the detected device's. Raises :class:`UnknownName` for a
        requested GPU that no spec stands for."""
        if requested:
            spec = self.gpu_named(requested)
            if spec is None:
                known = ", ".join(sorted(s.name for s, _ in self.gpu_specs())) or "none"
                raise UnknownName(f"unknown GPU {requested!r}; known: {known}")
            return spec
        return self.resolve_gpu(device_name, arch) if device_name else None

    def warn(self, message: str) -> None:
        """Report a plugin problem that does not stop the command, once per message."""
        if message not in self.warnings:
            self.warnings.append(message)
            self.on_warning(message)

    def build_include_dirs(self) -> list[str]:
        """Header directories the plugins add to candidate builds, in plugin order."""
        dirs: list[str] = []
        for impl in reversed(self.pm.hook.kernelpro_build_include_dirs.get_hookimpls()):
            name = self.pm.get_name(impl.plugin) or "?"
            try:
                got: Any = impl.function()
            except Exception as exc:
                raise PluginError(f"plugin {name!r}: kernelpro_build_include_dirs failed: "
                                  f"{type(exc).__name__}: {_first_line(str(exc))}") from None
            dirs += [str(d) for d in got or ()]
        return dirs

    # lifecycle ---------------------------------------------------------------------------
    @property
    def hook(self) -> Any:
        return self.pm.hook

    def register_commands(self, cli: Any) -> None:
        # one plugin whose commands fail to register must not take the command line down;
        # nor may it replace a command that is already there (core's own, or an earlier
        # plugin's): click would let it, silently. Core's plugins register first.
        impls = list(reversed(self.pm.hook.kernelpro_register_commands.get_hookimpls()))
        impls.sort(key=lambda impl: not (self.pm.get_name(impl.plugin) or "").startswith("core_"))
        for impl in impls:
            plugin_name = self.pm.get_name(impl.plugin) or "?"
            before = dict(getattr(cli, "commands", {}))
            try:
                impl.function(cli=cli)
            except Exception as exc:
                error = f"{type(exc).__name__}: {_first_line(str(exc))}"
            else:
                replaced = sorted(n for n, c in before.items() if cli.commands.get(n) is not c)
                if not replaced:
                    continue
                error = (f"it registers the command{'s' if len(replaced) > 1 else ''} "
                         f"{', '.join(repr(n) for n in replaced)}, which already exist{'s' if len(replaced) == 1 else ''}")
            if hasattr(cli, "commands"):  # what it added in that call is left out, the rest kept
                cli.commands.clear()
                cli.commands.update(before)
            self.hook_failures.append(HookFailure(
                plugin_name, self._dist_of.get(plugin_name, (None, None))[0], "kernelpro_register_commands", error))

    def call_first(self, hook: str, **kwargs: Any) -> tuple[Any, str] | None:
        """A firstresult hook called as pluggy would (last registered first, first non-None
        wins), but a plugin that raises ends in :class:`PluginFailed` naming it. Returns the
        value with the name of the plugin that returned it, or None."""
        for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
            plugin_name = self.pm.get_name(impl.plugin) or "?"
            try:
                value = impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})
            except Exception as exc:
                raise PluginFailed(self.who(plugin_name), hook, exc, plugin=plugin_name) from None
            if value is not None:
                return value, plugin_name
        return None

    def describe(self) -> list[dict[str, Any]]:
        """What ``kernelpro plugins --json`` prints."""
        reg = self._collect()
        out = []
        conflicted = {r.plugin: f"{KINDS[k][1]} {n!r} is registered twice"
                      for (k, n), regs in self.conflicts.items() for r in regs}
        for info in sorted(self.infos, key=lambda i: i.name):
            things: dict[str, list[str]] = {}
            for kind, regs in reg.items():
                names = sorted(n for n, r in regs.items() if r.plugin == info.name)
                if names:
                    things[kind] = names
            gpus = [s.name for s, p in self.gpu_specs() if p == info.name]
            if gpus:
                things["gpu_spec"] = gpus
            out.append({
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "module": info.module,
                "hooks": list(info.hooks),
                "registers": things,
                "blocked": info.blocked,
                "error": info.error or self._runtime_error(info.name) or conflicted.get(info.name),
            })
        return out

    def _runtime_error(self, plugin: str) -> str | None:
        failed = [f for f in self.hook_failures if f.plugin == plugin]
        return "; ".join(f"failed in {f.hook}: {f.error}" for f in failed) or None


_INSTALLED: Plugins | None = None


def installed() -> Plugins:
    """The installed plugins (entry points, environment blocks applied), loaded once per
    process: for core code that runs outside a command's own registry (builds)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = Plugins()
    return _INSTALLED


def _api_problem(obj: Any) -> str | None:
    """Why ``obj`` (a plugin module or object) is not for this core's API, or None."""
    declared = getattr(obj, "KERNELPRO_API_VERSION", None)
    return None if declared is None else api_version_problem(declared)


def _error_text(exc: BaseException) -> str:
    """An exception's message on one line: the first line, except for pluggy's validation
    errors, whose first line names only the hook and whose later lines say what is wrong
    (e.g. an argument the hook does not have): those are joined."""
    if isinstance(exc, pluggy.PluginValidationError):
        return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return _first_line(str(exc))


def _unknown_hook_text(exc: pluggy.PluginValidationError) -> str:
    """pluggy's "unknown hook" message without the module's repr, with the closest hook's
    name when there is one."""
    import difflib
    import re

    found = re.match(r"unknown hook '([^']+)'", str(exc))
    if found is None:
        return _error_text(exc)
    specs = [n for n in dir(hookspecs) if n.startswith("kernelpro_")]
    close = difflib.get_close_matches(found.group(1), specs, n=1, cutoff=0.75)
    return f"unknown hook {found.group(1)!r}" + (f" (did you mean {close[0]!r}?)" if close else
                                                  " (no KernelPro hook has that name)")


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else ""
