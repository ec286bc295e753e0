#!/usr/bin/env bash
# Install every KernelPro distribution (editable) with its dependencies into .venv.
#   bash scripts/setup.sh            # creates .venv with python3
#   PYTHON=python3.11 bash scripts/setup.sh
#   KERNELPRO_EXTRAS=gpu bash scripts/setup.sh   # the GPU-only extras even without a GPU
# On a machine where torch sees a CUDA GPU it adds the GPU-only extras (kernelpro-cute[cutlass]:
# the CUTLASS sources for the CuTe code search); without one it leaves them out
# (KERNELPRO_EXTRAS=none leaves them out everywhere).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${KERNELPRO_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
# nothing to do when this script and every pyproject.toml are as at the last complete set-up
# (pip takes minutes to re-check an installed environment on a slow machine)
stamp="$VENV/.kernelpro-setup"
want=$(cat scripts/setup.sh pyproject.toml */pyproject.toml | sha256sum | cut -d' ' -f1)-${KERNELPRO_EXTRAS:-auto}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VPY" -c "import kernelpro, torch, triton, numpy" 2>/dev/null; then
    echo "set up already: $VENV (remove $stamp to set up again)"
    exit 0
fi
"$VPY" -m pip install -q --upgrade pip setuptools wheel
# torch: keep one that is already installed (CUDA or CPU build); otherwise the pinned release.
if ! "$VPY" -c "import torch" 2>/dev/null; then
    "$VPY" -m pip install -q "torch==${KERNELPRO_TORCH_VERSION:-2.13.0}"
fi
# triton: the expert generator's kernels are Triton (a CUDA torch build brings it; the CPU
# build does not, and without a GPU the kernels run in Triton's interpreter). Installed
# without dependencies so it cannot replace the torch build.
"$VPY" -c "import triton" 2>/dev/null || "$VPY" -m pip install -q --no-deps "triton==${KERNELPRO_TRITON_VERSION:-3.5.1}"
# Triton's interpreter computes with NumPy, which the CPU torch build does not bring
"$VPY" -c "import numpy" 2>/dev/null || "$VPY" -m pip install -q numpy
extras="${KERNELPRO_EXTRAS:-auto}"
if [ "$extras" = auto ]; then
    if "$VPY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
        extras=gpu
    else
        extras=none
    fi
fi
members=$("$VPY" - <<'PY'
import tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["kernelpro"]["workspace"]["members"]))
PY
)
args=()
for m in $members; do
    if [ -f "$m/pyproject.toml" ]; then
        if [ "$m" = kernelpro_core ]; then
            # core with its optional MCP server, so that tests/mcp runs on a fresh clone
            args+=(-e "./$m[mcp]")
        elif [ "$extras" = gpu ] && [ "$m" = kernelpro_cute ]; then
            args+=(-e "./$m[cutlass]")
        else
            args+=(-e "./$m")
        fi
    fi
done
"$VPY" -m pip install -q "${args[@]}"
echo "installed: ${args[*]}"
echo "$want" > "$stamp"
