#!/bin/bash
# Quick start: inspects the bundled sample model, runs it on the bundled inputs, and runs
# the default pipeline (pipelines/calibrate_minmax.toml) on it.
# usage: tools/quickstart.sh BUILD_DIR   (writes BUILD_DIR/quickstart/)
set -euo pipefail

build_dir=${1:?usage: tools/quickstart.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
qflow=$build_dir/bin/qflow
model=$root/models/sample/sample_cnn.onnx
input=$root/models/sample/input.npy
out=$build_dir/quickstart

if [ ! -x "$qflow" ]; then
  echo "quickstart: $qflow not found; build first (make build)" >&2
  exit 2
fi
mkdir -p "$out"

echo "== qflow inspect $model"
"$qflow" inspect "$model" | tee "$out/inspect.txt"
"$qflow" inspect "$model" --json >"$out/inspect.json"

echo
echo "== qflow infer $model --input $input --output-dir $out"
"$qflow" infer "$model" --input "$input" --output-dir "$out"

echo
echo "== qflow run pipelines/calibrate_minmax.toml --out $out/calibrate_minmax"
(cd "$root" && "$qflow" run pipelines/calibrate_minmax.toml --out "$out/calibrate_minmax")

echo
echo "quickstart wrote:"
find "$out" -type f | sort | sed 's/^/  /'
