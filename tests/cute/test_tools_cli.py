"""LLM tools and the ``kernelpro cute`` commands on the fixture corpus."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from kernelpro.api import ToolContext, ToolError
from kernelpro.problem import parse_problem

from kernelpro_cute import plugin
from kernelpro_cute.cli import parse_location
from kernelpro_cute.tools import CuteListTool, CuteReadTool, CuteSearchTool, CuteToolSettings


@pytest.fixture
def context():
    problem = parse_problem("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n")
    return ToolContext(problem=problem, parent=None, device="cpu", gpu=None, run_dir=None)


@pytest.fixture
def tools(mini_corpus, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    settings = CuteToolSettings(cutlass_path=str(mini_corpus.root))
    return CuteSearchTool(settings), CuteReadTool(settings), CuteListTool(settings)


def test_tool_schemas_and_names():
    assert [t.name for t in (CuteSearchTool, CuteReadTool, CuteListTool)] == ["cute_search", "cute_read", "cute_list"]
    assert CuteSearchTool.input_schema["required"] == ["query"]
    assert set(CuteReadTool.input_schema["properties"]) == {"path", "start", "end"}
    assert CuteListTool.input_schema["properties"]["path"]["type"] == "string"


def test_search_read_list(tools, context):
    search, read, listing = tools
    out = search.run({"query": "make_tiled_copy", "k": 2}, context)
    first = out.splitlines()[0]
    assert first.startswith("1. include/cute/atom/copy_atom.hpp:")
    assert "cute::make_tiled_copy" in first
    text = read.run({"path": "include/cute/swizzle.hpp", "start": 7, "end": 8}, context)
    assert text.splitlines()[0] == "include/cute/swizzle.hpp lines 7-8 of 12"
    assert "struct Swizzle" in text
    assert listing.run({"path": "include/cute"}, context).splitlines()[1:] == [
        "arch/", "atom/", "swizzle.hpp"]
    assert listing.run({}, context).startswith(".: 3 entries")


@pytest.mark.parametrize("tool_index, arguments, message", [
    (0, {}, "non-empty 'query'"),
    (0, {"query": "  "}, "non-empty 'query'"),
    (0, {"query": "copy", "k": 0}, "between 1 and 20"),
    (0, {"query": "copy", "k": "many"}, "integer"),
    (0, {"query": "copy", "k": None}, "k must be an integer"),
    (0, {"query": "of the"}, "no searchable words"),
    (1, {"path": "../outside.txt"}, "outside the CUTLASS corpus root"),
    (1, {"path": "include/cute/swizzle.hpp", "start": 9, "end": 2}, "before start line"),
    (1, {"path": "include/cute"}, "is a directory"),
    (1, {"path": 3}, "'path' string"),
    (1, {"path": "include/cute/swizzle.hpp", "start": None}, "start must be an integer"),
    (2, {"path": "../.."}, "outside the CUTLASS corpus root"),
    (2, {"path": "include/cute/swizzle.hpp"}, "not a directory"),
])
def test_bad_calls_raise_one_line_tool_errors(tools, context, tool_index, arguments, message):
    with pytest.raises(ToolError, match=message) as info:
        tools[tool_index].run(arguments, context)
    assert "\n" not in str(info.value)


def test_read_and_list_need_no_index(mini_corpus, context, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    settings = CuteToolSettings(cutlass_path=str(mini_corpus.root))
    CuteReadTool(settings).run({"path": "include/cute/swizzle.hpp"}, context)
    CuteListTool(settings).run({"path": "include"}, context)
    assert not (tmp_path / "xdg").exists()


def test_missing_corpus_is_a_tool_error(context, monkeypatch, tmp_path):
    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    monkeypatch.setattr("kernelpro_cute.corpus.package_source_dir", lambda: None)
    with pytest.raises(ToolError, match="pip install nvidia-cutlass"):
        CuteSearchTool().run({"query": "copy"}, context)


@pytest.fixture
def cli(mini_corpus, monkeypatch, tmp_path):
    monkeypatch.setenv("CUTLASS_PATH", str(mini_corpus.root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    @click.group()
    def root():
        pass

    plugin.kernelpro_register_commands(root)
    runner = CliRunner()
    return lambda *args: runner.invoke(root, list(args))


def test_cli_search_text_and_json(cli):
    res = cli("cute", "search", "tma", "load")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("1. include/cute/arch/copy_sm90_tma.hpp:")
    res = cli("cute", "search", "--json", "-k", "2", "Swizzle")
    rows = json.loads(res.output)
    assert rows[0]["path"] == "include/cute/swizzle.hpp" and rows[0]["symbol"] == "cute::Swizzle"
    assert set(rows[0]) == {"path", "start_line", "end_line", "symbol", "kind", "signature", "snippet", "score"}
    assert len(rows) <= 2


def test_cli_show(cli, tmp_path):
    res = cli("cute", "show", "include/cute/swizzle.hpp:7-8")
    assert res.exit_code == 0 and res.output.splitlines()[0] == "include/cute/swizzle.hpp lines 7-8 of 12"
    res = cli("cute", "show", "include/cute/swizzle.hpp:7")
    assert res.output.splitlines()[0] == "include/cute/swizzle.hpp lines 7-7 of 12"
    res = cli("cute", "show", "include/cute/swizzle.hpp")
    assert "lines 1-12 of 12" in res.output
    res = cli("cute", "show", "examples/cute/tutorial")
    assert res.output.split() == ["README.md", "tiled_copy.cu"]
    assert not (tmp_path / "xdg").exists()  # showing a file builds no index


@pytest.mark.parametrize("args, message", [
    (("cute", "show", "../../etc/passwd"), "outside the CUTLASS corpus root"),
    (("cute", "show", "include/cute/swizzle.hpp:9-3"), "before start line"),
    (("cute", "show", "include/missing.hpp:1-2"), "no such file"),
    (("cute", "search", "-k", "0", "copy"), "-k must be between"),
    (("cute", "search", "the", "of"), "no searchable words"),
])
def test_cli_bad_input_exits_2_with_one_line(cli, args, message):
    res = cli(*args)
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]


def test_cli_missing_corpus_exits_2(cli, monkeypatch):
    monkeypatch.delenv("CUTLASS_PATH")
    monkeypatch.setattr("kernelpro_cute.corpus.package_source_dir", lambda: None)
    res = cli("cute", "search", "copy")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: no CUTLASS/CuTe sources found: pip install nvidia-cutlass (the extra kernelpro-cute[cutlass]), "
        "or set CUTLASS_PATH to a CUTLASS checkout"]


def test_cli_index_builds_and_reports(cli, tmp_path):
    res = cli("cute", "index")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].endswith("(CUTLASS_PATH)")
    assert lines[1].startswith(f"index    {tmp_path / 'xdg' / 'kernelpro' / 'cute-index'}")
    assert lines[2].startswith("files    8  chunks ")


def test_parse_location():
    assert parse_location("a/b.hpp") == ("a/b.hpp", None, None)
    assert parse_location("a/b.hpp:3") == ("a/b.hpp", 3, None)
    assert parse_location("a/b.hpp:3-9") == ("a/b.hpp", 3, 9)
    with pytest.raises(ValueError):
        parse_location(":3-4")
