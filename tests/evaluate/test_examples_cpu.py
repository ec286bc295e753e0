"""Every shipped example, evaluated with an honest candidate (the reference's own forward)
through all the checks: none may be rejected. Sizes are shrunk through the examples'
module-level ALL_CAPS integer constants so the test stays fast."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluate_paths import REPO
from kernelpro.records import Verdict

EXAMPLES = sorted((REPO / "examples").glob("*.py"))


def shrink(source: str, cap: int = 32) -> str:
    def repl(m: re.Match) -> str:
        value = int(m.group(2))
        return f"{m.group(1)}{min(value, cap) if value >= 64 else value}"

    return re.sub(r"^([A-Z][A-Z0-9_]*\s*=\s*)(\d+)\s*$", repl, source, flags=re.M)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_honest_candidate_of_example_passes(run_eval, session_dir, example: Path):
    small = session_dir / f"example_{example.stem}.py"
    small.write_text(shrink(example.read_text()))
    cand = session_dir / f"example_{example.stem}_same_ops.py"
    cand.write_text(small.read_text() + "\n\nclass ModelNew(Model):\n    pass\n")
    result = run_eval(cand, small)
    assert result.verdict is Verdict.CORRECT, result.reason
    assert not any(f.startswith("degenerate_reference") for f in result.flags), result.flags
