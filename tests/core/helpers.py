"""Helpers for core tests: run the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"
FAST = DATA / "fast_config.yaml"


def kernelpro(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kernelpro.cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd)
