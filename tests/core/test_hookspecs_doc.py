"""hookspecs.md documents exactly the hooks in kernelpro.hookspecs, with their signatures."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import kernelpro.hookspecs as specs

DOC = Path(__file__).resolve().parents[2] / "hookspecs.md"


def _code_hooks() -> dict[str, object]:
    return {name: fn for name, fn in vars(specs).items() if name.startswith("kernelpro_") and callable(fn)}


def _doc_sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = re.split(r"^### (kernelpro_\w+)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_hook_is_documented_and_every_documented_hook_exists():
    code, doc = set(_code_hooks()), set(_doc_sections())
    assert code - doc == set(), f"undocumented hooks: {sorted(code - doc)}"
    assert doc - code == set(), f"documented hooks that do not exist: {sorted(doc - code)}"


def test_documented_signatures_name_the_real_parameters():
    sections = _doc_sections()
    for name, fn in _code_hooks().items():
        params = list(inspect.signature(fn).parameters)
        sig = re.search(rf"def {name}\((.*)\) ->", sections[name])
        assert sig, f"{name}: no signature line"
        documented = [p.split(":")[0].strip() for p in _split_top(sig.group(1)) if p.strip()]
        assert documented == params, f"{name}: documented {documented}, code {params}"


def _split_top(args: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += ch in "[(" and 1 or 0
        depth -= ch in "])" and 1 or 0
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def test_firstresult_is_stated_truthfully():
    sections = _doc_sections()
    for name, fn in _code_hooks().items():
        opts = getattr(fn, "kernelpro_spec", {}) or {}
        first = bool(opts.get("firstresult"))
        text = sections[name]
        if first:
            assert "This hook is firstresult" in text, name
        else:
            assert "Not firstresult" in text, name


def test_every_section_has_an_example():
    for name, text in _doc_sections().items():
        assert text.count("```python") >= 2, f"{name}: needs a signature block and an example"
