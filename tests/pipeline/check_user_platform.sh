#!/bin/bash
# A platform of the user's own, end to end: nash-lite (nash without GlobalAveragePool,
# Softmax and Resize) in a folder of its own goes through pipelines/bpu_ptq.toml on the
# Fashion-MNIST sample, found once through $QFLOW_PLATFORM_PATH and once through the
# pipeline var platform-path. Each run must place the pool on the CPU, write a .hbm that
# verify finds bit-identical to the .bc, and `qflow hbm run` must run it. A platform file
# naming an op qflow does not compute is refused when the pipeline starts.
#
# usage: check_user_platform.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work/platforms" "$work/typo"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

sed -e 's/^name = "nash"/name = "nash-lite"/' -e '/^GlobalAveragePool = /d' -e '/^Softmax = /d' -e '/^Resize = /d' \
  plugins/backends/bpu/platforms/nash.toml >"$work/platforms/nash-lite.toml"
grep -q '^name = "nash-lite"' "$work/platforms/nash-lite.toml" || { echo "FAIL: could not derive nash-lite"; exit 1; }

run_pipeline() {  # OUT [qflow run arguments...]
  local out=$1
  shift
  "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx \
    --set data=models/fashion_mnist/calib_200.npy --set platform=nash-lite --out "$out" --threads 2 "$@" >"$out.log" 2>&1
}

for how in env var; do
  out=$work/$how
  if [ $how = env ]; then
    QFLOW_PLATFORM_PATH=$work/platforms run_pipeline "$out"
  else
    run_pipeline "$out" --set platform-path="$work/platforms"
  fi || { fail "$how: bpu_ptq.toml failed: $(tail -3 "$out.log")"; continue; }
  grep -q "GlobalAveragePool.*CPU\|CPU.*GlobalAveragePool" "$out/model_check_result.txt" ||
    fail "$how: the check report does not place GlobalAveragePool on the CPU"
  python3 - "$out/verify_result.json" <<'PY' || fail "$how: verify result out of bounds"
import json, sys
result = json.load(open(sys.argv[1]))
ok = result["bit_identical"] and all(o["hbm_cosine_min"] > 0.99 for o in result["outputs"])
sys.exit(0 if ok else 1)
PY
  "$qflow" hbm run "$out/fashion_mnist.hbm" --input models/fashion_mnist/calib_200.npy --output-dir "$out/hbm_run" \
    >"$out.hbm.log" 2>&1 || fail "$how: qflow hbm run failed: $(tail -2 "$out.hbm.log")"
done

# A typo in a user platform file fails before any stage runs, with the closest op names.
sed -e 's/^name = "nash"/name = "typo"/' -e 's/^Conv = /Conv2D = /' plugins/backends/bpu/platforms/nash.toml >"$work/typo/typo.toml"
"$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx \
  --set data=models/fashion_mnist/calib_200.npy --set platform=typo --set platform-path="$work/typo" \
  --out "$work/typo_out" >"$work/typo.log" 2>&1 && fail "a platform naming Conv2D was accepted"
grep -q "ops: unknown operator 'Conv2D' (did you mean Conv?)" "$work/typo.log" ||
  fail "the Conv2D typo was not reported: $(tail -2 "$work/typo.log")"
[ -e "$work/typo_out/fashion_mnist_original_float_model.onnx" ] && fail "stages ran before the platform was checked"

[ $failed = 0 ] && echo "user platform nash-lite: compiled, verified and run through the search path and platform-path"
exit $failed
