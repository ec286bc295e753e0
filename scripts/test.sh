#!/usr/bin/env bash
# Set everything up, type-check (mypy), run the tests. Extra arguments go to pytest.
#   bash scripts/test.sh                 # the default selection: tests marked slow are skipped
#   bash scripts/test.sh --runslow       # everything (what CI runs: .ci/run)
#   bash scripts/test.sh tests/core -x   # some tests
# GPU tests (marked gpu) are skipped without a GPU.
#
# The tests run in their own environment, .venv-test: it sees every package of .venv (a
# .pth file adds .venv's site-packages after its own) and adds pytest, the test-only
# plugin distributions (tests/plugin_dist, tests/plugin_examples/*) and the optional
# dependencies the tests read (the CUTLASS sources). .venv itself never gets the test
# plugins, so `kernelpro plugins` and the demo do not list them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TVENV="${KERNELPRO_TEST_VENV:-.venv-test}"
main_site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ ! -x "$TVENV/bin/python" ]; then
    .venv/bin/python -m venv "$TVENV"   # on .venv's base interpreter
fi
test_site=$("$TVENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf 'import site; site.addsitedir(%s)\n' "'$main_site'" > "$test_site/kernelpro-main-venv.pth"
if ! "$TVENV/bin/python" -c "import pytest, kernelpro_testplugin" 2>/dev/null; then
    # a venv of Python 3.11 carries its own setuptools (65), which shadows .venv's in the
    # non-isolated build below and cannot read the SPDX license expression: >=77 here too
    "$TVENV/bin/python" -m pip install -q pytest "setuptools>=77"
    # the example plugins, one distribution per extension kind (tests/plugin_examples/README.md);
    # built with .venv's setuptools, in one pip call (an isolated build each costs many seconds)
    dists=(-e tests/plugin_dist)
    for dist in tests/plugin_examples/*/; do dists+=(-e "$dist"); done
    "$TVENV/bin/python" -m pip install -q --no-deps --no-build-isolation "${dists[@]}"
fi
# the CUTLASS sources the CuTe tests search (kernelpro-cute's cutlass extra)
"$TVENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('cutlass_library') is None)" \
    || "$TVENV/bin/python" -m pip install -q "nvidia-cutlass>=4.2,<5"
# Ray, for the tests of the ray executor on a local CPU cluster (kernelpro-core's ray extra;
# about 80 MB, 25 s to install here)
"$TVENV/bin/python" -c "import ray" 2>/dev/null || "$TVENV/bin/python" -m pip install -q "ray>=2.9"
# type check first: a mypy error fails the script before the tests run
bash scripts/typecheck.sh
"$TVENV/bin/python" -m pytest "$@"
