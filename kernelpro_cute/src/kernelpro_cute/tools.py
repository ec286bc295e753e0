"""LLM tools over the CUTLASS/CuTe corpus: ``cute_search``, ``cute_read``, ``cute_list``.

``cute_search`` opens the corpus index lazily (once per corpus root and process; the
first build took 35-45 s on 2 cores); ``cute_read`` and ``cute_list`` read files directly and
need no index. All answer in plain text. Paths are relative to the corpus root; a path that leaves it, a missing
corpus or a malformed argument raises :class:`kernelpro.api.ToolError` with one line.
"""

from __future__ import annotations

import threading
from typing import Any, overload

import attrs
from kernelpro.api import LLMTool, ToolContext, ToolError

from kernelpro_cute.corpus import CorpusError, locate
from kernelpro_cute.index import CorpusFiles, CorpusPathError, CuteIndex, open_index

_INDEXES: dict[str, CuteIndex] = {}
_LOCK = threading.Lock()

#: most results one search returns
MAX_K = 20
#: most lines one read returns (about 16k tokens of C++ at the upper end)
MAX_READ_LINES = 400


@attrs.frozen
class CuteToolSettings:
    cutlass_path: str | None = None  # a CUTLASS checkout; default: CUTLASS_PATH, then nvidia-cutlass


def shared_index(cutlass_path: str | None = None) -> CuteIndex:
    """The process-wide index for a corpus (built or loaded on first use)."""
    try:
        corpus = locate(cutlass_path)
    except CorpusError as exc:
        raise ToolError(str(exc)) from None
    key = str(corpus.root)
    with _LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = open_index(corpus)
        return _INDEXES[key]


def shared_files(cutlass_path: str | None = None) -> CorpusFiles:
    """File access to a corpus; reuses its index object when one is open already."""
    try:
        corpus = locate(cutlass_path)
    except CorpusError as exc:
        raise ToolError(str(exc)) from None
    with _LOCK:
        return _INDEXES.get(str(corpus.root)) or CorpusFiles(corpus)


@overload
def _int_arg(arguments: dict[str, Any], name: str, default: int) -> int: ...


@overload
def _int_arg(arguments: dict[str, Any], name: str, default: None) -> int | None: ...


def _int_arg(arguments: dict[str, Any], name: str, default: int | None) -> int | None:
    """``arguments[name]`` as an int; ``default`` when absent. An explicit null is allowed
    only where the argument has no default (it means: not given)."""
    value = arguments.get(name, default)
    if value is None:
        if default is not None:
            raise ToolError(f"{name} must be an integer")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ToolError(f"{name} must be an integer")
    try:
        as_int = int(value)
    except ValueError:
        raise ToolError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value != as_int:
        raise ToolError(f"{name} must be an integer, got {value!r}")
    return as_int


def format_results(results) -> str:
    if not results:
        return "no results"
    blocks = []
    for n, r in enumerate(results, 1):
        head = f"{n}. {r.path}:{r.start_line}-{r.end_line}  {r.kind} {r.symbol}  (score {r.score:.2f})"
        blocks.append(head + ("\n" + r.snippet if r.snippet else ""))
    return "\n\n".join(blocks)


class CuteSearchTool(LLMTool):
    name = "cute_search"
    Settings = CuteToolSettings
    description = (
        "Search the CUTLASS/CuTe C++ sources (headers under include/cute and include/cutlass, "
        "and the examples, including the Hopper WGMMA/TMA tutorials) by words or identifiers. "
        "Returns the best matching classes/functions with path, line range and a snippet."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words or identifiers, e.g. 'tma load copy atom' or 'make_tiled_copy'"},
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 5},
        },
        "required": ["query"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("cute_search needs a non-empty 'query' string")
        k = _int_arg(arguments, "k", 5)
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be between 1 and {MAX_K}")
        index = shared_index(self.settings.cutlass_path)
        try:
            results = index.search(query, k=k)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return format_results(results)


class CuteReadTool(LLMTool):
    name = "cute_read"
    Settings = CuteToolSettings
    description = (
        "Read lines of a CUTLASS/CuTe source file (path relative to the CUTLASS root, as "
        f"cute_search returns it). start and end are 1-based and inclusive; at most {MAX_READ_LINES} lines."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "start": {"type": "integer", "minimum": 1, "default": 1},
            "end": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path = arguments.get("path")
        if not isinstance(path, str) or not path.strip():
            raise ToolError("cute_read needs a 'path' string")
        start = _int_arg(arguments, "start", 1)
        end = _int_arg(arguments, "end", None)
        if end is None:
            end = start + 199
        files = shared_files(self.settings.cutlass_path)
        try:
            return files.read(path, start, end, max_lines=MAX_READ_LINES)
        except CorpusPathError as exc:
            raise ToolError(str(exc)) from None


class CuteListTool(LLMTool):
    name = "cute_list"
    Settings = CuteToolSettings
    description = (
        "List a directory of the CUTLASS/CuTe tree (relative to its root; '.' for the root). "
        "Subdirectories end with '/'."
    )
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "default": "."}},
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path = arguments.get("path", ".")
        if not isinstance(path, str):
            raise ToolError("cute_list 'path' must be a string")
        files = shared_files(self.settings.cutlass_path)
        try:
            entries = files.list_dir(path)
        except CorpusPathError as exc:
            raise ToolError(str(exc)) from None
        return f"{path.strip() or '.'}: {len(entries)} entries\n" + "\n".join(entries)


TOOLS = (CuteSearchTool, CuteReadTool, CuteListTool)
