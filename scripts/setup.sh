#!/usr/bin/env bash
# Install every KernelPro distribution (editable) with its dependencies into .venv.
#   bash scripts/setup.sh            # creates .venv with python3
#   PYTHON=python3.11 bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${KERNELPRO_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip setuptools wheel
# torch: keep one that is already installed (CUDA or CPU build); otherwise the pinned release.
if ! "$VPY" -c "import torch" 2>/dev/null; then
    "$VPY" -m pip install -q "torch==${KERNELPRO_TORCH_VERSION:-2.13.0}"
fi
members=$("$VPY" - <<'PY'
import tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["kernelpro"]["workspace"]["members"]))
PY
)
args=()
for m in $members; do
    if [ -f "$m/pyproject.toml" ]; then
        # core with its optional MCP server, so that tests/mcp runs on a fresh clone
        if [ "$m" = "kernelpro_core" ]; then args+=(-e "./$m[mcp]"); else args+=(-e "./$m"); fi
    fi
done
"$VPY" -m pip install -q "${args[@]}"
echo "installed: ${args[*]}"
