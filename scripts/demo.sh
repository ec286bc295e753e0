#!/usr/bin/env bash
# Set everything up, then optimize the shipped example problem with the default generator
# (auto: the LLM when ANTHROPIC_API_KEY is set, else the offline expert, which writes Triton
# kernels). With a GPU: examples/fused_bias_gelu.py on it, profiled at all three levels.
# Without one: the same problem at a small size (examples/fused_bias_gelu_cpu.py), whose
# Triton kernels run under Triton's interpreter, so the run ends in a few minutes.
# The run directory is printed at the end.
#   BUDGET=N (default 4)  RUN_DIR=DIR  PROBLEM=FILE (instead of the example)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${PROBLEM:-}" ]; then
    if .venv/bin/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
        PROBLEM=examples/fused_bias_gelu.py
    else
        PROBLEM=examples/fused_bias_gelu_cpu.py
        echo "no CUDA GPU: the CPU-sized example, Triton kernels in Triton's interpreter (correctness and the loop, not speed)" >&2
    fi
fi
RUN_DIR="${RUN_DIR:-runs/demo-$(date +%Y%m%d-%H%M%S)}"
status=0
.venv/bin/kernelpro optimize "$PROBLEM" --budget "${BUDGET:-4}" -o "$RUN_DIR" || status=$?
# the winner, its verdict and timing, and what the profilers found in it (from report.md)
if [ -f "$RUN_DIR/report.md" ]; then
    echo
    sed -n '/^## Best result/,/^## Candidates/p' "$RUN_DIR/report.md" | sed '$d'
    echo "the kernel: $RUN_DIR/best.py; every candidate: $RUN_DIR/candidates/; the report: $RUN_DIR/report.md"
fi
exit "$status"
