"""Who may import whom (docs/architecture.md): core imports no plugin package; a plugin
imports from core only ``kernelpro.api``, and no other plugin distribution."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "kernelpro_core" / "src" / "kernelpro"


def _plugin_packages() -> list[Path]:
    pkgs = [p for d in sorted(ROOT.glob("kernelpro_plugins_*")) + [ROOT / "kernelpro_cute"]
            for p in sorted((d / "src").glob("*")) if (p / "__init__.py").is_file()]
    examples = sorted(p for p in (ROOT / "tests" / "plugin_examples").glob("*/src/*") if (p / "__init__.py").is_file())
    return pkgs + examples + [ROOT / "tests" / "plugin_dist" / "src" / "kernelpro_testplugin"]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, at any depth (inside functions too);
    relative imports come back with a leading dot."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, "." * node.level + (node.module or "")))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            out.append((node.lineno, node.args[0].value))
    return out


def test_the_rules_see_imports_inside_functions_and_by_importlib(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\ndef f():\n    from kernelpro_cute.corpus import locate\n"
                 "    import importlib\n    importlib.import_module('kernelpro_plugins_ncu')\n")
    assert [m for _, m in imported_modules(f)] == ["os", "kernelpro_cute.corpus", "importlib",
                                                   "kernelpro_plugins_ncu"]


def test_core_imports_no_plugin_package():
    bad = [f"{path.relative_to(ROOT)}:{line} imports {mod}"
           for path in sorted(CORE.rglob("*.py")) for line, mod in imported_modules(path)
           if mod.split(".")[0].startswith("kernelpro_")]
    assert bad == [], "core must reach plugins only through hooks:\n" + "\n".join(bad)


@pytest.mark.parametrize("pkg", _plugin_packages(), ids=lambda p: p.name)
def test_a_plugin_imports_only_the_public_api_of_core_and_no_other_plugin(pkg):
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        for line, mod in imported_modules(path):
            top = mod.split(".")[0]
            if (top == "kernelpro" and mod != "kernelpro.api") or (top.startswith("kernelpro_") and top != pkg.name):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert bad == [], f"{pkg.name} may import only kernelpro.api from core:\n" + "\n".join(bad)


def test_records_and_the_api_sit_at_the_bottom():
    """The records import nothing of kernelpro; the API only what it re-exports."""
    assert [m for _, m in imported_modules(CORE / "records.py") if m.startswith("kernelpro")] == []
    allowed = {"kernelpro.records", "kernelpro.hookspecs", "kernelpro.gpus", "kernelpro.search.tree", "kernelpro.search.build",
               "kernelpro.evaluate.forward", "kernelpro.problem", "kernelpro.progress", "kernelpro.gpulock"}
    api = {m for _, m in imported_modules(CORE / "api.py") if m.startswith("kernelpro")}
    assert api <= allowed, api - allowed


def test_everything_the_api_exports_exists():
    import kernelpro.api as api

    assert [n for n in api.__all__ if not hasattr(api, n)] == []
    assert len(set(api.__all__)) == len(api.__all__)
