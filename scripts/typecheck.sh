#!/usr/bin/env bash
# mypy over the core and the plugin distributions, as configured in pyproject.toml's
# [tool.mypy]; fails on any error. Uses the environment of scripts/setup.sh (created when
# missing) and installs the pinned mypy and the PyYAML stubs into it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
.venv/bin/python -m pip install -q "mypy==2.4.1" "types-PyYAML==6.0.12.20261122"
.venv/bin/python -m mypy
