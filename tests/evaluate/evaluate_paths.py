"""Paths and a problem-copy helper for the evaluator's tests.

Kept out of ``conftest.py`` so the test modules import them by a name of their own: several
test folders have a ``conftest.py``, and when pytest is given more than one of those folders
(``pytest tests/evaluate tests/ncu``) it loads every folder's conftest as the module
``conftest`` before collecting, so ``from conftest import ...`` would reach whichever came last.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def small_copy(example: Path, dest: Path, sizes: dict[str, int]) -> Path:
    """A copy of an example problem with its module-level size constants replaced."""
    text = example.read_text()
    for name, value in sizes.items():
        text, n = re.subn(rf"^{name}\s*=\s*\d+", f"{name} = {value}", text, flags=re.M)
        assert n == 1, f"{example}: no constant {name}"
    dest.write_text(text)
    return dest


def cheater(name: str) -> Path:
    return HERE / "cheaters" / f"{name}.py"


def honest(name: str) -> Path:
    return HERE / "honest" / f"{name}.py"


def isolation(name: str) -> Path:
    return HERE / "isolation" / f"{name}.py"


def problem(name: str) -> Path:
    return HERE / "problems" / f"{name}.py"


def wrong(name: str) -> Path:
    """Candidates that compute a wrong result without trying to cheat a check."""
    return HERE / "wrong" / f"{name}.py"
