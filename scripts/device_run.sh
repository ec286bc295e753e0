#!/usr/bin/env bash
# Run steps on the GPU machine, from the repository root:
#   bash scripts/device_run.sh STEPFILE
# STEPFILE has one step a line: "NAME TIMEOUT_S COMMAND...". Each step's output is written as
# it comes to $OUT/kp-logs/NAME.log (so a call stopped at the device's limit still returns
# what ran); the last lines are printed. Keep the steps' limits together under the call's.
# Installs carried wheels (.whl/, and build/ray_whl/ from scripts/ray_wheels.sh) into /tmp/site and every distribution of the repo
# (editable, no dependencies) first.
set -u
export PYTHONUNBUFFERED=1
LOGS="${OUT:-/tmp}/kp-logs"
mkdir -p "$LOGS"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        > "$LOGS/wheels.log" 2>&1 || { echo "wheel install failed"; tail -5 "$LOGS/wheels.log"; }
    export PYTHONPATH=/tmp/site
fi
# Ray and its dependencies, when the call carries build/ray_whl (bash scripts/ray_wheels.sh)
if ls build/ray_whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        build/ray_whl/*.whl >> "$LOGS/wheels.log" 2>&1 || { echo "ray wheel install failed"; tail -5 "$LOGS/wheels.log"; }
    export PYTHONPATH=/tmp/site
    export PATH="/tmp/site/bin:$PATH"
fi
for d in kernelpro_core kernelpro_plugins_ncu kernelpro_plugins_sass kernelpro_plugins_nsys \
         kernelpro_plugins_energy kernelpro_plugins_expert kernelpro_cute tests/plugin_dist; do
    if [ -f "$d/pyproject.toml" ]; then
        python3 -m pip install -q --no-deps --no-build-isolation --no-index -e "$d" >> "$LOGS/install.log" 2>&1 \
            || echo "install failed: $d"
    fi
done
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader)"
echo "python: $(python3 --version) torch: $(python3 -c 'import torch; print(torch.__version__)')"
while read -r name limit cmd; do
    [ -z "${name:-}" ] && continue
    case "$name" in \#*) continue;; esac
    echo "=== $name (limit ${limit}s): $cmd"
    start=$(date +%s)
    timeout --kill-after=10 "$limit" bash -c "$cmd" > "$LOGS/$name.log" 2>&1
    rc=$?
    echo "--- $name rc=$rc after $(( $(date +%s) - start ))s"
    tail -n "${TAIL:-12}" "$LOGS/$name.log"
done < "$1"
