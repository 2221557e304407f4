#!/bin/bash
# Quick start: inspects the bundled sample model (the Fashion-MNIST classifier), runs it on
# the bundled calibration samples, and takes it through the standard BPU pipeline
# (pipelines/bpu_ptq.toml: optimize, calibrate with auto, PTQ model, check, lower to the .bc,
# compile the .hbm, verify, estimate performance) for the nash platform.
# usage: tools/quickstart.sh BUILD_DIR   (writes BUILD_DIR/quickstart/)
set -euo pipefail

build_dir=${1:?usage: tools/quickstart.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
qflow=$build_dir/bin/qflow
model=$root/models/fashion_mnist/fashion_mnist.onnx
input=$root/models/fashion_mnist/calib_200.npy
out=$build_dir/quickstart

if [ ! -x "$qflow" ]; then
  echo "quickstart: $qflow not found; build first (make build)" >&2
  exit 2
fi
rm -rf "$out" && mkdir -p "$out"

echo "== qflow inspect $model"
"$qflow" inspect "$model" | tee "$out/inspect.txt"
"$qflow" inspect "$model" --json >"$out/inspect.json"

echo
echo "== qflow infer $model --input $input --output-dir $out --batch-size 50"
"$qflow" infer "$model" --input "$input" --output-dir "$out" --batch-size 50

echo
echo "== qflow run pipelines/bpu_ptq.toml --set model=$model --set data=$input --out $out/bpu_ptq"
(cd "$root" && "$qflow" run pipelines/bpu_ptq.toml --set model="$model" --set data="$input" --out "$out/bpu_ptq")

echo
echo "== qflow hbm info $out/bpu_ptq/fashion_mnist.hbm"
"$qflow" hbm info "$out/bpu_ptq/fashion_mnist.hbm"

echo
echo "== verify: PTQ model vs .bc simulator vs .hbm runtime on the calibration samples"
cat "$out/bpu_ptq/verify_result.json"

echo
echo "the report: $out/bpu_ptq/report.html (open it in a browser)"

echo
echo "quickstart wrote:"
find "$out" -type f | sort | sed 's/^/  /'
