"""Getting ptxas' log for a torch ``load_inline`` build after the fact.

``torch.utils.cpp_extension`` runs ninja with its output piped and drops it on success, so
a candidate's build directory has no ptxas log (``-Xptxas -v`` output, spill bytes, wgmma
advisories). Its ``build.ninja`` keeps the exact nvcc command though::

    nvcc = /usr/local/cuda/bin/nvcc
    cuda_cflags = -DTORCH_EXTENSION_NAME=ext ... -gencode=arch=compute_90,code=sm_90 ...
    rule cuda_compile
      command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags
    build cuda.cuda.o: cuda_compile /path/to/ext/cuda.cu

This module expands the ``cuda_compile`` statements of that file and re-runs them with
``-Xptxas -v`` appended, writing objects to a scratch directory (the build itself is not
touched) except for the log itself, cached as ``kernelpro_ptxas.log`` next to
build.ninja. The recompilation costs what the original CUDA compile cost (tens of seconds
with torch's headers), so the collector does it only when the SASS shows something the log
explains, once per build.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import attrs

from kernelpro.api import CollectorError

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@attrs.frozen
class CudaCompile:
    source: Path
    command: str  # a shell command line, as ninja would run it


def _unescape(text: str) -> str:
    return text.replace("$ ", " ").replace("$:", ":").replace("$$", "$")


def parse_build_ninja(text: str) -> tuple[dict[str, str], dict[str, str], list[tuple[str, str, list[str]]]]:
    """Top-level variables, rule commands, and build statements (outputs, rule, inputs)."""
    variables: dict[str, str] = {}
    rules: dict[str, str] = {}
    builds: list[tuple[str, str, list[str]]] = []
    current_rule: str | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.startswith((" ", "\t")):
            key, _, value = raw.strip().partition("=")
            if current_rule and key.strip() == "command":
                rules[current_rule] = value.strip()
            continue
        current_rule = None
        if raw.startswith("rule "):
            current_rule = raw.split(None, 1)[1].strip()
        elif raw.startswith("build "):
            head, _, tail = raw[len("build "):].partition(": ")
            parts = re.split(r"(?<!\$) ", tail.strip())
            builds.append((_unescape(head.strip()), parts[0], [_unescape(p) for p in parts[1:] if p]))
        elif "=" in raw:
            key, _, value = raw.partition("=")
            variables[key.strip()] = value.strip()
    return variables, rules, builds


def cuda_compiles(build_ninja: Path, out_dir: Path) -> list[CudaCompile]:
    """The nvcc commands of ``build_ninja`` with outputs redirected to ``out_dir`` and
    ``-Xptxas -v`` appended."""
    variables, rules, builds = parse_build_ninja(build_ninja.read_text(errors="replace"))
    result = []
    for n, (out, rule, inputs) in enumerate(builds):
        command = rules.get(rule, "")
        uses_nvcc = "$nvcc" in command or "${nvcc}" in command
        if not uses_nvcc or not inputs:
            continue
        scratch_out = str(out_dir / f"{n}_{Path(out).name}")
        local = dict(variables, out=scratch_out, **{"in": " ".join(inputs)})
        expanded = _VAR.sub(lambda m: local.get(m.group(1) or m.group(2), ""), command)
        result.append(CudaCompile(Path(inputs[0]), expanded + " -Xptxas -v"))
    return result


def rebuild_ptxas_log(extension_dir: Path, timeout_s: float = 180.0) -> str:
    """Re-run the extension's CUDA compiles with ``-Xptxas -v``; return their output.
    CollectorError (one line) when there is no build.ninja or a compile fails."""
    ninja = extension_dir / "build.ninja"
    if not ninja.is_file():
        raise CollectorError(f"no build.ninja in {extension_dir}")
    scratch = Path(tempfile.mkdtemp(prefix="kernelpro_sass_rebuild_"))
    logs = []
    try:
        compiles = cuda_compiles(ninja, scratch)
        if not compiles:
            raise CollectorError(f"{ninja}: no CUDA compile statements")
        for c in compiles:
            try:
                proc = subprocess.run(c.command, shell=True, cwd=extension_dir, capture_output=True,
                                      text=True, timeout=timeout_s, errors="replace")
            except subprocess.TimeoutExpired:
                raise CollectorError(f"recompiling {c.source.name} for ptxas -v timed out after {timeout_s:.0f} s") from None
            output = proc.stdout + proc.stderr
            if proc.returncode != 0:
                first = next((ln.strip() for ln in output.splitlines() if "error" in ln.lower()),
                             output.strip().splitlines()[0] if output.strip() else f"exit {proc.returncode}")
                raise CollectorError(f"recompiling {c.source.name} for ptxas -v failed: {first[:300]}")
            logs.append(output)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return "\n".join(logs)


CACHE_NAME = "kernelpro_ptxas.log"


def extension_ptxas_log(extension_dir: Path, timeout_s: float = 180.0) -> str:
    """:func:`rebuild_ptxas_log`, cached in ``<extension_dir>/kernelpro_ptxas.log`` while it is
    newer than build.ninja and the extension's shared objects."""
    cache = extension_dir / CACHE_NAME
    inputs = [extension_dir / "build.ninja", *extension_dir.glob("*.so")]
    try:
        newest = max(p.stat().st_mtime for p in inputs if p.exists())
        if cache.is_file() and cache.stat().st_mtime >= newest:
            return cache.read_text(errors="replace")
    except (OSError, ValueError):
        pass
    log = rebuild_ptxas_log(extension_dir, timeout_s)
    try:
        cache.write_text(log)
    except OSError:
        pass  # a read-only build directory: no cache, same result
    return log
