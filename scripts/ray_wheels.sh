#!/usr/bin/env bash
# Wheels for a Ray run on the GPU machine, which installs nothing from a registry:
#   bash scripts/ray_wheels.sh            # -> build/ray_whl/
# Ray's wheel (about 79 MB) is larger than what one device call carries (64 MiB), and a third
# of it is ray/jars (Java workers, unused from Python): the copy written here leaves that
# folder out (and its lines of RECORD). Also Ray's dependencies the GPU image may lack.
# scripts/device_run.sh installs build/ray_whl/*.whl when the call carries it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=build/ray_whl
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$TMP" "ray>=2.9" "msgpack>=1.0,<2" "protobuf>=3.20.3" "packaging>=24.2" filelock requests urllib3 \
    certifi charset-normalizer
for whl in "$TMP"/*.whl; do
    name=$(basename "$whl")
    case "$name" in
        ray-*)
            "$PY" - "$whl" "$OUT/$name" <<'PYEOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        if info.filename.startswith("ray/jars/"):
            continue
        data = zin.read(info.filename)
        if info.filename.endswith(".dist-info/RECORD"):
            data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b"ray/jars/"))
        zout.writestr(info, data)
PYEOF
            ;;
        *) cp "$whl" "$OUT/" ;;
    esac
done
du -sh "$OUT"
ls -la "$OUT"
