#!/usr/bin/env bash
# Set everything up, install the test-only plugin distribution, run the test suite.
# GPU tests are skipped without a GPU. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pip install -q -e ./tests/plugin_dist pytest
.venv/bin/python -m pytest "$@"
