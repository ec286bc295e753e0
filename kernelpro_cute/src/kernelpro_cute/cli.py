"""``kernelpro cute`` commands: ``search``, ``show`` and ``index``.

Bad input and a missing corpus end with exit status 2 and one line on stderr.
"""

from __future__ import annotations

import json
import re
import sys

import click

from kernelpro_cute.corpus import CorpusError, locate
from kernelpro_cute.index import CorpusFiles, CorpusPathError, open_index
from kernelpro_cute.tools import format_results


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)  # the one-line form every kernelpro command uses
    sys.exit(2)


def _index(cutlass_path: str | None, quiet: bool = False):
    from kernelpro.api import ProgressDisplay

    try:
        with ProgressDisplay(quiet, "kernelpro cute"):  # the first use builds the index (minutes)
            return open_index(locate(cutlass_path))
    except CorpusError as exc:
        _fail(str(exc))


_SPEC = re.compile(r"^(?P<path>.*?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")


def parse_location(spec: str) -> tuple[str, int | None, int | None]:
    """``PATH[:START[-END]]`` -> (path, start, end); ValueError with one line."""
    m = _SPEC.match(spec.strip())
    if not m or not m.group("path"):
        raise ValueError(f"{spec!r} is not PATH[:START-END]")
    start = int(m.group("start")) if m.group("start") else None
    end = int(m.group("end")) if m.group("end") else None
    if start is not None and start < 1:
        raise ValueError("line numbers start at 1")
    if start is not None and end is not None and end < start:
        raise ValueError(f"end line {end} is before start line {start}")
    return m.group("path"), start, end


@click.group("cute")
def cute_group() -> None:
    """Search and read the CUTLASS/CuTe sources (nvidia-cutlass package or CUTLASS_PATH)."""


@cute_group.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("-k", "k", type=int, default=5, show_default=True, help="number of results")
@click.option("--json", "as_json", is_flag=True, help="print the results as a JSON list")
@click.option("--cutlass-path", default=None, help="a CUTLASS checkout (default: CUTLASS_PATH, then nvidia-cutlass)")
def search_cmd(query: tuple[str, ...], k: int, as_json: bool, cutlass_path: str | None) -> None:
    """Ranked search over classes, functions, aliases and macros; best first."""
    if not 1 <= k <= 100:
        _fail("-k must be between 1 and 100")
    index = _index(cutlass_path, quiet=as_json)
    try:
        results = index.search(" ".join(query), k=k)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        click.echo(format_results(results))


@cute_group.command("show")
@click.argument("location")
@click.option("--cutlass-path", default=None, help="a CUTLASS checkout (default: CUTLASS_PATH, then nvidia-cutlass)")
def show_cmd(location: str, cutlass_path: str | None) -> None:
    """Print PATH[:START-END] of the corpus (a directory is listed)."""
    try:
        path, start, end = parse_location(location)
    except ValueError as exc:
        _fail(str(exc))
    try:
        index = CorpusFiles(locate(cutlass_path))  # no index needed to show a file
    except CorpusError as exc:
        _fail(str(exc))
    try:
        target = index.resolve(path)
        if target.is_dir():
            click.echo("\n".join(index.list_dir(path)))
            return
        if start is None:
            start, end = 1, None
        elif end is None:
            end = start
        click.echo(index.read(path, start, end, max_lines=100000))
    except CorpusPathError as exc:
        _fail(str(exc))


@cute_group.command("index")
@click.option("--cutlass-path", default=None, help="a CUTLASS checkout (default: CUTLASS_PATH, then nvidia-cutlass)")
def index_cmd(cutlass_path: str | None) -> None:
    """Build the search index now (it is otherwise built on first search) and print where
    it is and what it holds."""
    index = _index(cutlass_path)
    meta = index.meta()
    click.echo(f"corpus   {index.corpus.root} ({index.corpus.origin})")
    click.echo(f"index    {index.db_path}")
    click.echo(f"files    {meta.get('files')}  chunks {meta.get('chunks')}  symbols {meta.get('symbols')}"
               f"  built in {meta.get('build_s')} s")
