"""``kernelpro analyze TRACE``: read an existing timeline file.

Accepts a PyTorch profiler (Kineto) trace, ``.json`` or ``.json.gz`` (the content decides:
a JSON object with a ``traceEvents`` list holding PyTorch profiler events), and an
Nsight Systems SQLite export (``.sqlite``, from ``nsys export --type sqlite`` or
``nsys profile --export=sqlite``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kernelpro.api import Analyzer, CollectorError, ProfileData

from kernelpro_plugins_nsys import kineto, nsys_sqlite
from kernelpro_plugins_nsys.profile import LEVEL, to_profile_data

JSON_SUFFIXES = (".json", ".json.gz")
SQLITE_SUFFIXES = (".sqlite", ".sqlite3")


class TraceAnalyzer(Analyzer):
    """Timeline traces: Kineto JSON (.json, .json.gz) and Nsight Systems SQLite exports."""

    name: ClassVar[str] = "timeline"
    level: ClassVar[str] = LEVEL
    description: ClassVar[str] = "PyTorch profiler (Kineto) trace JSON or Nsight Systems SQLite export"

    def accepts(self, path: Path) -> bool:
        """By name: .json / .json.gz (Kineto) or .sqlite (nsys export). A .json that turns out
        not to be a trace is rejected by :meth:`load` with one line."""
        name = Path(path).name.lower()
        return name.endswith(JSON_SUFFIXES) or name.endswith(SQLITE_SUFFIXES)

    def load(self, path: Path) -> ProfileData:
        path = Path(path)
        if not path.is_file():
            raise CollectorError(f"{path}: no such file")
        name = path.name.lower()
        if name.endswith(SQLITE_SUFFIXES) or nsys_sqlite.is_sqlite(path):
            timeline = nsys_sqlite.read(path)
        elif name.endswith(JSON_SUFFIXES):
            timeline = kineto.read(path)
        else:
            raise CollectorError(f"{path}: not a timeline trace (expected .json, .json.gz or .sqlite)")
        return to_profile_data(timeline, self.name)
