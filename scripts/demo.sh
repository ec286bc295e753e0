#!/usr/bin/env bash
# Set everything up, then optimize the shipped example problem (on the GPU when there is
# one, else on the CPU). The run directory is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/kernelpro optimize examples/fused_bias_gelu.py --budget "${BUDGET:-4}" -o "${RUN_DIR:-runs/demo-$(date +%Y%m%d-%H%M%S)}"
