"""The SASS collector (``kernelpro profile``, inside the loop) and analyzer (``kernelpro analyze``)."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import attrs

from kernelpro.api import Analyzer, Collector, CollectorError, ProfileData, ProfileTarget

from kernelpro_plugins_sass.binaries import (
    DisassembledFile,
    disassemble,
    environment_arch,
    find_compile_logs,
    find_machine_code,
    has_device_code,
    ptxas_log_for,
    read_logs,
    triton_variant,
)
from kernelpro_plugins_sass.compile import COMPILE_TIMEOUT_S, compile_cu, compile_ptx, default_arch
from kernelpro_plugins_sass.ninja_rebuild import extension_ptxas_log
from kernelpro_plugins_sass.payload import COLLECTOR_NAME, LEVEL, build_profile
from kernelpro_plugins_sass.toolchain import find_tool, missing_message

NO_MACHINE_CODE = ("no machine code of its own under the build directory: the candidate runs "
                   "library kernels (PyTorch, cuBLAS, cuDNN), which SASS analysis skips")


@attrs.frozen
class SassSettings:
    """``arch``: architecture to analyse in fat binaries and to compile ``.cu`` for (empty:
    $KERNELPRO_SASS_ARCH, else the newest in the file / sm_90 for sources).
    ``reassemble_triton_ptx``: run ``ptxas -v`` on Triton's cached PTX to get its advisories.
    ``rebuild_extension_logs``: re-run a load_inline extension's nvcc commands (from its
    build.ninja) with ``-Xptxas -v`` when no kept log covers it, to get spill bytes and
    advisories: "when_useful" (its SASS has warpgroup MMA or local-memory traffic, what the
    log explains), "always", or "never". The log is cached next to build.ninja. A stage-2
    call asking for metric ``sass.ptxas_log`` counts as "always".
    ``timeout_s``: per tool call."""

    arch: str = ""
    reassemble_triton_ptx: bool = True
    rebuild_extension_logs: str = attrs.field(
        default="when_useful", validator=attrs.validators.in_(("when_useful", "always", "never")))
    timeout_s: float = 120.0


def _disassembler_missing() -> str | None:
    if find_tool("cuobjdump") is None and find_tool("nvdisasm") is None:
        return missing_message("cuobjdump")
    return None


class SassCollector(Collector):
    """Disassembles every kernel the candidate built (torch load_inline extensions, Triton's
    cubins, nvcc objects) under ``target.build_dir``. SASS is static, so stage 1 collects
    everything and a stage-2 call returns the same data."""

    name = COLLECTOR_NAME
    level = LEVEL
    Settings = SassSettings
    description = "SASS disassembly, ptxas resource usage and advisories of the candidate's own kernels"

    def unavailable_reason(self, target: ProfileTarget) -> str | None:
        return _disassembler_missing()

    def collect(self, target: ProfileTarget, stage: int, metrics: Sequence[str] = ()) -> ProfileData:
        build_dir = target.build_dir
        if build_dir is None or not Path(build_dir).is_dir():
            return ProfileData(level=LEVEL, collector=self.name,
                               notes=(f"no build directory ({build_dir}); " + NO_MACHINE_CODE,))
        mode = self.settings.rebuild_extension_logs
        if mode != "never" and PTXAS_LOG_METRIC in metrics:
            mode = "always"
        return collect_build_dir(Path(build_dir), self.settings, rebuild_logs=mode)


#: the metric a micro-profiler declares to get ptxas logs rebuilt in stage 2
PTXAS_LOG_METRIC = "sass.ptxas_log"


def collect_build_dir(build_dir: Path, settings: SassSettings = SassSettings(),
                      rebuild_logs: str | None = None) -> ProfileData:
    """ProfileData for every kernel found under ``build_dir``. ``rebuild_logs`` overrides
    ``settings.rebuild_extension_logs`` (see :class:`SassSettings`)."""
    build_dir = Path(build_dir).resolve()  # the evaluator may hand a symlink to a cache entry
    codes = find_machine_code(build_dir)
    if not codes:
        return ProfileData(level=LEVEL, collector=COLLECTOR_NAME, notes=(NO_MACHINE_CODE,))
    reason = _disassembler_missing()
    if reason:
        raise CollectorError(reason)
    mode = rebuild_logs or settings.rebuild_extension_logs
    logs = read_logs(find_compile_logs(build_dir))
    arch = settings.arch or environment_arch()
    files: list[DisassembledFile] = []
    notes: list[str] = []
    for code in codes:
        log = logs
        if code.ptx is not None and settings.reassemble_triton_ptx and find_tool("ptxas"):
            try:
                log = log + "\n" + ptxas_log_for(code.ptx, timeout_s=min(settings.timeout_s, 60.0))
            except CollectorError as exc:
                notes.append(f"{code.path.name}: {exc}")
        try:
            result = disassemble(code.path, arch, settings.timeout_s, log, code.origin)
        except CollectorError as exc:
            notes.append(f"{code.path.name}: {exc}")
            continue
        if code.origin == "torch_extension" and wants_rebuild(result, mode):
            try:
                extra = extension_ptxas_log(code.path.parent, timeout_s=max(settings.timeout_s, 180.0))
                result = disassemble(code.path, arch, settings.timeout_s, log + "\n" + extra, code.origin)
            except CollectorError as exc:
                notes.append(f"{code.path.name}: {exc}")
        if code.origin == "triton":
            result = attrs.evolve(result, variant=triton_variant(code))
        files.append(result)
    if not files and notes:
        raise CollectorError(notes[0])
    if any(k.resources is None or k.resources.spill_store_bytes is None for f in files for k in f.kernels):
        notes.append("no ptxas log for some kernels: their spill bytes and advisories are unknown "
                     "(LDL/STL are still counted from the SASS)")
    return build_profile(files, notes)


#: SASS that a ptxas log explains: warpgroup MMA (serialization advisories) and local
#: memory (spills vs. local arrays)
_LOG_WORTHY = frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA", "LDL", "STL"})


def wants_rebuild(result: DisassembledFile, mode: str) -> bool:
    """Whether to recompile a load_inline extension for its ptxas log."""
    if mode == "never" or not result.kernels:
        return False
    if all(k.resources is not None and k.resources.spill_store_bytes is not None for k in result.kernels):
        return False  # a kept log already covered it
    if mode == "always":
        return True
    return any(i.opcode in _LOG_WORTHY for k in result.kernels for i in k.instructions)


_ARCH_DIRECTIVE = re.compile(r"kernelpro-arch:\s*(sm_\w+)")


def source_arch(text: str) -> str | None:
    """A ``// kernelpro-arch: sm_90a`` line in the first 30 lines of a source picks its arch."""
    head = "\n".join(text.splitlines()[:30])
    m = _ARCH_DIRECTIVE.search(head)
    return m.group(1) if m else None


class SassAnalyzer(Analyzer):
    """``kernelpro analyze FILE`` for machine code: ``.cubin``, ``.fatbin``, ``.o``, ``.so``
    (disassembled as they are), ``.cu`` (compiled with ``nvcc -cubin -arch=ARCH -Xptxas -v``,
    60 s limit) and ``.ptx`` (assembled with ``ptxas -v``)."""

    name = COLLECTOR_NAME
    level = LEVEL
    Settings = SassSettings
    description = "disassemble a cubin/fatbin/object/shared object, or compile a .cu/.ptx, and read its SASS"

    BINARY = (".cubin", ".fatbin", ".o", ".so")
    SOURCE = (".cu", ".ptx")

    def accepts(self, path: Path) -> bool:
        path = Path(path)
        return path.suffix in self.BINARY + self.SOURCE or ".so." in path.name

    def load(self, path: Path) -> ProfileData:
        path = Path(path)
        if not path.is_file():
            raise CollectorError(f"{path}: no such file")
        reason = _disassembler_missing()
        if reason:
            raise CollectorError(reason)
        timeout = self.settings.timeout_s
        if path.suffix in self.SOURCE:
            scratch = Path(tempfile.mkdtemp(prefix="kernelpro_sass_"))
            try:
                if path.suffix == ".cu":
                    try:
                        text = path.read_text(errors="replace")
                    except OSError as exc:
                        raise CollectorError(f"cannot read {path}: {exc.strerror}") from None
                    arch = self.settings.arch or source_arch(text) or default_arch()
                    compiled = compile_cu(path, scratch, arch, timeout_s=min(timeout, COMPILE_TIMEOUT_S))
                else:
                    compiled = compile_ptx(path, scratch, self.settings.arch or None,
                                           timeout_s=min(timeout, COMPILE_TIMEOUT_S))
                result = disassemble(compiled.cubin, compiled.arch, timeout, compiled.log, "source")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            result = attrs.evolve(result, path=path)
        else:
            if not has_device_code(path):
                raise CollectorError(f"{path}: no CUDA device code in this file")
            result = disassemble(path, self.settings.arch or environment_arch(), timeout, "", "nvcc")
        if not result.kernels:
            raise CollectorError(f"{path}: no kernels in its device code")
        return build_profile([result], [])
