#!/usr/bin/env bash
# Set everything up, install the test-only plugin distribution, type-check (mypy), run the test suite.
# GPU tests are skipped without a GPU. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pip install -q -e ./tests/plugin_dist pytest
# the example plugins, one distribution per extension kind (tests/plugin_examples/README.md)
for example in tests/plugin_examples/*/; do
    .venv/bin/python -m pip install -q --no-deps -e "$example"
done
# Triton runs the expert generator's kernels in its interpreter on machines without a GPU;
# installed without dependencies so it cannot replace the torch build.
.venv/bin/python -c "import triton" 2>/dev/null || .venv/bin/python -m pip install -q --no-deps "triton==3.5.1"
# type check first: a mypy error fails the script before the tests run
bash scripts/typecheck.sh
.venv/bin/python -m pytest "$@"
