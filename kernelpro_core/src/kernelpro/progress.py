"""Progress of long operations, for the command line.

Code that works for a long time says which step it is in with :func:`stage` (the
evaluator's stages: compile, correctness, timing; each profiling pass; building the CuTe
index); nothing is shown unless a command installed a :class:`Display`. A display shows
on a terminal one live line (rich: the command, a bar where the total is known, the
current step, the time elapsed), and elsewhere plain lines on stderr, one per step once
the work has taken a second (a quick command prints none); with
``quiet`` (``--quiet``, ``--json``) it shows nothing, so stdout carries only the result.
Plugins reach :func:`stage` through ``kernelpro.api.progress_stage``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

_listeners: list[Callable[[str], None]] = []


def stage(text: str) -> None:
    """Say that the current long operation entered the step ``text`` (shown by the
    innermost display, if any; cheap when there is none)."""
    if _listeners:
        try:
            _listeners[-1](text)
        except Exception:  # a display must never break the work it shows
            pass


class Display:
    """The display of one command: ``with Display(quiet, "evaluating"):`` around the work.
    ``total``: a bar of that many steps (``advance()``); ``print()`` writes a line above
    the live display (or on stderr)."""

    def __init__(self, quiet: bool, label: str, total: int | None = None, stream: Any = None,
                 delay_s: float = 1.0) -> None:
        self.quiet = quiet
        self.delay_s = delay_s  # plain lines only once the work has taken this long: a quick command stays silent
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.live = not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
        self._prog: Any = None
        self._task: Any = None
        self._console: Any = None
        self._last = ""
        self._t0 = time.monotonic()

    # --- the work's side --------------------------------------------------------------------

    def stage(self, text: str) -> None:
        if self.quiet or text == self._last:
            return
        self._last = text
        if self._prog is not None:
            self._prog.update(self._task, stage=text)
            return
        elapsed = time.monotonic() - self._t0
        if elapsed >= self.delay_s:
            print(f"[{elapsed:6.1f}s] {self.label}: {text}", file=self.stream, flush=True)

    def advance(self) -> None:
        if self._prog is not None:
            self._prog.advance(self._task)

    def print(self, text: str) -> None:
        """A line that stays (a result as it comes), one line whatever the width."""
        if self.quiet:
            return
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream)
        self._console.print(text, highlight=False, markup=False, soft_wrap=True)

    # --- the command's side -----------------------------------------------------------------

    def __enter__(self) -> Display:
        self._t0 = time.monotonic()
        if self.live:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn)

            self._console = Console(file=self.stream)
            columns: list[Any] = [SpinnerColumn(), TextColumn(f"[bold]{self.label}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            columns += [TimeElapsedColumn(), TextColumn("{task.fields[stage]}")]
            self._prog = Progress(*columns, console=self._console, transient=True)
            self._task = self._prog.add_task(self.label, total=self.total, stage="")
            self._prog.__enter__()
        if not self.quiet:
            _listeners.append(self.stage)
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.quiet and self.stage in _listeners:
            _listeners.remove(self.stage)
        if self._prog is not None:
            self._prog.__exit__(*exc)
            self._prog = None
