"""The progress display of long operations (kernelpro.progress): plain lines on a stream
that is not a terminal, a live display on one, nothing when quiet or when no display is
installed."""

from __future__ import annotations

import io

from kernelpro import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_elsewhere_one_per_stage():
    out = io.StringIO()
    with progress.Display(False, "evaluating", stream=out, delay_s=0) as display:
        progress.stage("c1: compile")
        progress.stage("c1: compile")  # the same stage again: no second line
        progress.stage("c1: correctness")
        display.print("a result line")
    progress.stage("after the display: shown nowhere")
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines[:2]] == ["evaluating: c1: compile", "evaluating: c1: correctness"]
    assert lines[2] == "a result line" and len(lines) == 3


def test_a_quick_command_prints_no_stage_lines():
    out = io.StringIO()
    with progress.Display(False, "cute", stream=out):  # the default: lines after 1 s only
        progress.stage("building the index: 8/8 files")
    assert out.getvalue() == ""


def test_quiet_shows_nothing():
    out = io.StringIO()
    with progress.Display(True, "evaluating", stream=out) as display:
        progress.stage("c1: timing")
        display.print("result")
    assert out.getvalue() == ""


def test_a_terminal_gets_a_live_display_that_disappears():
    out = _Tty()
    with progress.Display(False, "optimizing", total=3, stream=out) as display:
        assert display.live
        progress.stage("c0001: timing")
        display.advance()
        display.print("c0001 <- root: kept")
    assert "c0001 <- root: kept" in out.getvalue()


def test_the_innermost_display_gets_the_stage_and_a_broken_one_breaks_nothing():
    outer, inner = io.StringIO(), io.StringIO()
    with progress.Display(False, "outer", stream=outer, delay_s=0):
        with progress.Display(False, "inner", stream=inner, delay_s=0):
            progress.stage("x")
        progress.stage("y")
    assert "inner: x" in inner.getvalue() and "outer: y" in outer.getvalue() and "x" not in outer.getvalue()
    progress._listeners.append(lambda s: 1 / 0)
    try:
        progress.stage("z")  # no exception
    finally:
        progress._listeners.pop()
