"""Locating the CUTLASS/CuTe source tree that searches and builds use.

Order: an explicit path (argument or config) -> ``$CUTLASS_PATH`` -> the data directory
of the installed ``nvidia-cutlass`` wheel (``cutlass_library/source``). The wheel ships
``include/cute``, ``include/cutlass``, ``examples/`` (with the CuTe Hopper WGMMA and TMA
tutorials) and ``tools/``; it is found without importing ``cutlass_library`` (whose
``__init__`` pulls in optional dependencies).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import attrs

#: what to tell a user whose machine has no corpus
HOW_TO_GET = "pip install nvidia-cutlass (the extra kernelpro-cute[cutlass]), or set CUTLASS_PATH to a CUTLASS checkout"


class CorpusError(ValueError):
    """No usable CUTLASS tree; the message is one line."""


@attrs.frozen
class Corpus:
    """A CUTLASS source tree: ``root`` holds ``include/cute``; ``origin`` says how it was found."""

    root: Path
    origin: str  # "argument" | "CUTLASS_PATH" | "nvidia-cutlass"

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        """Directories to put on the compiler's include path (``include`` and, when the
        tree has it, ``tools/util/include`` for the host helpers)."""
        dirs = [self.root / "include"]
        util = self.root / "tools" / "util" / "include"
        if util.is_dir():
            dirs.append(util)
        return tuple(dirs)


def _valid(root: Path) -> bool:
    return (root / "include" / "cute").is_dir() and (root / "include" / "cutlass").is_dir()


def package_source_dir() -> Path | None:
    """``cutlass_library/source`` of the installed nvidia-cutlass wheel, or None."""
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "source"
        if _valid(candidate):
            return candidate
    return None


def locate(path: str | os.PathLike | None = None) -> Corpus:
    """Find the corpus; raise :class:`CorpusError` with one line when there is none."""
    if path:
        root = Path(path).expanduser()
        if not _valid(root):
            raise CorpusError(f"{root}: not a CUTLASS tree (no include/cute and include/cutlass)")
        return Corpus(root.resolve(), "argument")
    env = os.environ.get("CUTLASS_PATH")
    if env:
        root = Path(env).expanduser()
        if not _valid(root):
            raise CorpusError(
                f"CUTLASS_PATH={env} is not a CUTLASS tree (no include/cute and include/cutlass)"
            )
        return Corpus(root.resolve(), "CUTLASS_PATH")
    pkg = package_source_dir()
    if pkg is not None:
        return Corpus(pkg.resolve(), "nvidia-cutlass")
    raise CorpusError(f"no CUTLASS/CuTe sources found: {HOW_TO_GET}")
