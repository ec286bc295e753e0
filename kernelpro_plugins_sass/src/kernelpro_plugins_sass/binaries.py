"""Finding a candidate's machine code and disassembling it.

Where machine code lives under a candidate's build directory (see the build convention:
``TORCH_EXTENSIONS_DIR=<build_dir>/torch_extensions``, ``TRITON_CACHE_DIR=<build_dir>/triton``):

* ``torch_extensions/<name>/<name>.so``: the extension ``load_inline`` linked, with the
  device code in its ``.nv_fatbin`` section; ``*.cuda.o`` next to it holds the same code.
* ``triton/<hash>/<kernel>.cubin``: one cubin per compiled Triton kernel, next to
  ``<kernel>.ptx`` and ``<kernel>.json`` (metadata: num_warps, shared bytes, target).
* any other ``*.cubin``, ``*.fatbin``, ``*.o`` or ``*.so`` that carries device code.

Compiler logs: ``*.log`` files anywhere under the build directory are read as ptxas
output (the evaluator's ``compile.log`` holds the compile process's output, but
``torch.utils.cpp_extension`` runs ninja with its output piped unless ``verbose=True`` and
drops it on success, so ptxas lines appear there only when the build was verbose and ran
with ``-Xptxas -v``). Triton's ``.ptx`` can be re-assembled with
``ptxas -v`` in a second or two to get the advisories ptxas printed for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import attrs

from kernelpro.api import CollectorError

from kernelpro_plugins_sass.compile import compile_ptx
from kernelpro_plugins_sass.disasm import SassKernel, parse_sass
from kernelpro_plugins_sass.resources import CompilerMessage, parse_ptxas_log, parse_res_usage
from kernelpro_plugins_sass.toolchain import demangle, find_tool, missing_message, run_tool

BINARY_SUFFIXES = (".cubin", ".fatbin", ".so", ".o")
#: the largest file searched for device code (bytes); bigger ones are vendored libraries
MAX_BINARY_BYTES = 512 * 1024 * 1024
ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190  # ELF machine number of CUDA cubins


@attrs.frozen
class MachineCode:
    """One file holding device code, and what kind of build produced it."""

    path: Path
    origin: str  # "torch_extension" | "triton" | "nvcc"
    ptx: Path | None = None  # Triton's PTX next to its cubin
    metadata: dict = attrs.field(factory=dict)  # Triton's <kernel>.json


@attrs.frozen
class DisassembledFile:
    path: Path
    origin: str
    kernels: tuple[SassKernel, ...]
    messages: tuple[CompilerMessage, ...] = ()
    notes: tuple[str, ...] = ()
    variant: str = ""  # Triton: "<cache hash>, num_warps=.., num_stages=.." (autotuning configs)


def triton_variant(code: MachineCode) -> str:
    """What tells apart two compilations of one Triton kernel (autotuning configs)."""
    md = code.metadata
    parts = [code.path.parent.name[:10]]
    for key in ("num_warps", "num_stages", "num_ctas"):
        if key in md:
            parts.append(f"{key}={md[key]}")
    return ", ".join(parts)


def _elf_machine(head: bytes) -> int | None:
    if len(head) < 20 or not head.startswith(ELF_MAGIC):
        return None
    little = head[5] == 1
    return int.from_bytes(head[18:20], "little" if little else "big")


def has_device_code(path: Path) -> bool:
    """A CUDA cubin (ELF machine 190), a fatbin, or a host ELF with an ``.nv_fatbin`` section."""
    try:
        size = path.stat().st_size
        if size == 0 or size > MAX_BINARY_BYTES:
            return False
        with path.open("rb") as fh:
            head = fh.read(64)
            if path.suffix == ".fatbin":
                return True
            machine = _elf_machine(head)
            if machine is None:
                return False
            if machine == EM_CUDA:
                return True
            data = head + fh.read()
    except OSError:
        return False
    return b".nv_fatbin" in data or b"__nv_relfatbin" in data or b".nvFatBinSegment" in data


def _origin(path: Path, root: Path) -> str:
    parts = path.relative_to(root).parts if path.is_relative_to(root) else path.parts
    if "torch_extensions" in parts:
        return "torch_extension"
    if "triton" in parts or (path.suffix == ".cubin" and path.with_suffix(".json").exists()):
        return "triton"
    return "nvcc"


def find_machine_code(build_dir: Path) -> list[MachineCode]:
    """Every file with device code under ``build_dir``: shared objects first, then cubins,
    fatbins and objects. Object files next to a shared object of the same build are
    skipped (the .so links the same device code)."""
    found: list[MachineCode] = []
    build_dir = Path(build_dir).resolve()
    if not build_dir.is_dir():
        return found
    files = sorted(p for p in build_dir.rglob("*") if p.suffix in BINARY_SUFFIXES and p.is_file())
    so_dirs = {p.parent for p in files if p.suffix == ".so" and has_device_code(p)}
    order = {".so": 0, ".cubin": 1, ".fatbin": 2, ".o": 3}
    for path in sorted(files, key=lambda p: (order[p.suffix], str(p))):
        if path.suffix == ".o" and path.parent in so_dirs:
            continue
        if not has_device_code(path):
            continue
        origin = _origin(path, build_dir)
        ptx = path.with_suffix(".ptx") if path.suffix == ".cubin" else None
        metadata: dict = {}
        meta_path = path.with_suffix(".json")
        if origin == "triton" and meta_path.exists():
            try:
                metadata = json.loads(meta_path.read_text())
            except (OSError, ValueError):
                metadata = {}
        found.append(MachineCode(path, origin, ptx if ptx and ptx.exists() else None, metadata))
    return found


def find_compile_logs(build_dir: Path) -> list[Path]:
    """``*.log`` files under the build directory (ptxas output the evaluator kept)."""
    if not build_dir.is_dir():
        return []
    # kernelpro_ptxas.log is this plugin's own cache of a rebuilt log (ninja_rebuild)
    return sorted(p for p in build_dir.rglob("*.log") if p.is_file() and p.name != "kernelpro_ptxas.log")


_ARCH_NUM = re.compile(r"sm_(\d+)([a-z]?)")


def _arch_key(arch: str | None) -> tuple[int, str]:
    m = _ARCH_NUM.match(arch or "")
    return (int(m.group(1)), m.group(2)) if m else (-1, "")


def pick_arch(archs: list[str | None], preferred: str | None = None) -> str | None:
    """The architecture to analyse in a fat binary: ``preferred`` (or its family, e.g.
    sm_90a for sm_90) when present, else the newest."""
    present = [a for a in archs if a]
    if not present:
        return None
    if preferred:
        for a in present:
            if a == preferred:
                return a
        for a in present:
            if a.rstrip("af") == preferred.rstrip("af"):
                return a
    return max(present, key=_arch_key)


def is_cubin(path: Path) -> bool:
    """An ELF of machine EM_CUDA (a cubin, whatever its suffix)."""
    try:
        with path.open("rb") as fh:
            return _elf_machine(fh.read(64)) == EM_CUDA
    except OSError:
        return False


def sass_listing(path: Path, timeout_s: float = 120.0) -> tuple[str, str]:
    """The SASS text of ``path`` and how it was made.

    With nvdisasm: ``nvdisasm -c -g`` on a cubin, or on each cubin ``cuobjdump -xelf all``
    extracts from a fat binary / object / shared object; ``-g`` adds the source file and
    line of each instruction when the code was built with line info (``-lineinfo``, Triton).
    Without nvdisasm: ``cuobjdump -sass`` (no source lines). Without cuobjdump: nvdisasm on
    cubins only."""
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    if nvdisasm is not None and is_cubin(path):
        return run_tool([str(nvdisasm), "-c", "-g", str(path)], timeout_s, what="nvdisasm"), "nvdisasm"
    if cuobjdump is None:
        raise CollectorError(missing_message("cuobjdump"))
    if nvdisasm is not None:
        scratch = Path(tempfile.mkdtemp(prefix="kernelpro_sass_xelf_"))
        try:
            try:
                subprocess.run([str(cuobjdump), "-xelf", "all", str(path.resolve())], cwd=scratch,
                               capture_output=True, text=True, timeout=timeout_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
            cubins = sorted(p for p in scratch.glob("*.cubin") if is_cubin(p))
            if cubins:
                texts = [run_tool([str(nvdisasm), "-c", "-g", str(c)], timeout_s, what="nvdisasm")
                         for c in cubins]
                return "\n".join(texts), "cuobjdump -xelf + nvdisasm"
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return _cuobjdump(cuobjdump, "-sass", path, timeout_s), "cuobjdump -sass"


def disassemble(path: Path, preferred_arch: str | None = None, timeout_s: float = 120.0,
                extra_log: str = "", origin: str = "nvcc") -> DisassembledFile:
    """Disassemble every kernel of ``path`` (:func:`sass_listing`), attach resource usage
    (``cuobjdump -res-usage``) and ptxas messages from ``extra_log``."""
    notes: list[str] = []
    text, _ = sass_listing(path, timeout_s)
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is not None:
        usage = parse_res_usage(_cuobjdump(cuobjdump, "-res-usage", path, timeout_s))
    else:
        usage = {}
        notes.append(f"{path.name}: cuobjdump missing, no resource usage (pip install nvidia-cuda-cuobjdump)")
    raw = parse_sass(text)
    if not raw:
        return DisassembledFile(path, origin, (), (), tuple(notes))
    arch = pick_arch([k.arch for k in raw], preferred_arch)
    raw = [k for k in raw if k.arch == arch or k.arch is None]
    log_usage, messages = parse_ptxas_log(extra_log) if extra_log else ({}, ())
    names = demangle([k.mangled for k in raw])
    kernels = []
    for k in raw:
        res = usage.get(k.mangled)
        from_log = log_usage.get(k.mangled)
        resources = (res.merged(from_log) if res else from_log)
        # an unnamed diagnostic belongs to the kernel only when the file has just one
        warnings = tuple(m.text for m in messages if m.kernel == k.mangled
                         or (m.kernel is None and len(raw) == 1))
        kernels.append(SassKernel(name=names.get(k.mangled, k.mangled), mangled=k.mangled,
                                  arch=k.arch, instructions=k.instructions, loops=k.loops,
                                  resources=resources, warnings=warnings, source_file=str(path)))
    return DisassembledFile(path, origin, tuple(kernels), tuple(messages), tuple(notes))


def _cuobjdump(tool: Path, flag: str, path: Path, timeout_s: float) -> str:
    try:
        return run_tool([str(tool), flag, str(path)], timeout_s, what=f"cuobjdump {flag}")
    except CollectorError as exc:
        if "does not contain device code" in str(exc):
            return ""
        raise


def ptxas_log_for(ptx: Path, timeout_s: float = 60.0) -> str:
    """Re-assemble Triton's PTX with ``ptxas -v`` in a scratch dir and return the log."""
    scratch = Path(tempfile.mkdtemp(prefix="kernelpro_sass_ptx_"))
    try:
        return compile_ptx(ptx, scratch, timeout_s=timeout_s).log
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_logs(paths: list[Path], max_bytes: int = 8 * 1024 * 1024) -> str:
    chunks = []
    for p in paths:
        try:
            with p.open("r", errors="replace") as fh:
                chunks.append(fh.read(max_bytes))
        except OSError:
            continue
    return "\n".join(chunks)


def environment_arch() -> str | None:
    value = os.environ.get("KERNELPRO_SASS_ARCH", "").strip()
    return value or None
