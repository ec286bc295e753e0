"""The SASS collector (``kernelpro profile``, inside the loop) and analyzer (``kernelpro analyze``)."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import attrs

from kernelpro.api import Analyzer, Collector, CollectorError, ProfileTarget
from kernelpro.records import ProfileData

from kernelpro_plugins_sass.binaries import (
    DisassembledFile,
    disassemble,
    environment_arch,
    find_compile_logs,
    find_machine_code,
    has_device_code,
    ptxas_log_for,
    read_logs,
)
from kernelpro_plugins_sass.compile import COMPILE_TIMEOUT_S, compile_cu, compile_ptx, default_arch
from kernelpro_plugins_sass.ninja_rebuild import rebuild_ptxas_log
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
    build.ninja) with ``-Xptxas -v`` to get spill counts and advisories: "stage2" (when a
    gated micro-profiler asks for metric ``sass.ptxas_log``), "always" or "never".
    ``timeout_s``: per tool call."""

    arch: str = ""
    reassemble_triton_ptx: bool = True
    rebuild_extension_logs: str = attrs.field(
        default="stage2", validator=attrs.validators.in_(("stage2", "always", "never")))
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
        rebuild = mode == "always" or (mode == "stage2" and PTXAS_LOG_METRIC in metrics)
        return collect_build_dir(Path(build_dir), self.settings, rebuild_logs=rebuild)


#: the metric a micro-profiler declares to get ptxas logs rebuilt in stage 2
PTXAS_LOG_METRIC = "sass.ptxas_log"


def collect_build_dir(build_dir: Path, settings: SassSettings = SassSettings(),
                      rebuild_logs: bool = False) -> ProfileData:
    """ProfileData for every kernel found under ``build_dir``; with ``rebuild_logs``, torch
    extensions without a kept log are recompiled with ``-Xptxas -v`` for their ptxas log."""
    codes = find_machine_code(build_dir)
    if not codes:
        return ProfileData(level=LEVEL, collector=COLLECTOR_NAME, notes=(NO_MACHINE_CODE,))
    reason = _disassembler_missing()
    if reason:
        raise CollectorError(reason)
    logs = read_logs(find_compile_logs(build_dir))
    arch = settings.arch or environment_arch()
    files: list[DisassembledFile] = []
    notes: list[str] = []
    for code in codes:
        log = logs
        if rebuild_logs and code.origin == "torch_extension" and not logs:
            try:
                log = rebuild_ptxas_log(code.path.parent, timeout_s=max(settings.timeout_s, 180.0))
            except CollectorError as exc:
                notes.append(f"{code.path.name}: {exc}")
        if code.ptx is not None and settings.reassemble_triton_ptx and find_tool("ptxas"):
            try:
                log = log + "\n" + ptxas_log_for(code.ptx, timeout_s=min(settings.timeout_s, 60.0))
            except CollectorError as exc:
                notes.append(f"{code.path.name}: {exc}")
        try:
            files.append(disassemble(code.path, arch, settings.timeout_s, log, code.origin))
        except CollectorError as exc:
            notes.append(f"{code.path.name}: {exc}")
    if not files and notes:
        raise CollectorError(notes[0])
    if not logs and not rebuild_logs:
        notes.append("no compile log under the build directory: spill byte counts come only "
                     "from ptxas logs, LDL/STL are counted from the SASS")
    return build_profile(files, notes)


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
