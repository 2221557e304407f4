#!/bin/bash
# The standard BPU pipeline (pipelines/bpu_ptq.toml) on the Fashion-MNIST sample for every
# bundled platform: every artifact present, verify reports the .hbm runtime bit-identical to
# the .bc simulator and close to the PTQ model, `qflow hbm run`, `qflow infer x.bc` and `qflow infer x.hbm` give
# byte-identical outputs, the precision search finds nothing to change, and (on bernoulli2, which has both BPU and CPU segments) a second
# run with another thread count writes byte-identical .bc and .hbm files.
#
# usage: check_bpu_ptq.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

artifacts="fashion_mnist_original_float_model.onnx fashion_mnist_optimized_float_model.onnx
  calibration_table.json fashion_mnist_calibrated_model.onnx fashion_mnist_ptq_model.onnx
  model_check_result.txt fashion_mnist_quantized_model.bc fashion_mnist.hbm verify_result.json
  model_perf.txt sensitivity.json precision.json precision_overrides.toml report.html manifest.json"
samples=$work/samples.npy
# The first 16 calibration samples, for the CLI comparisons (plain python3, no numpy).
python3 - models/fashion_mnist/calib_200.npy "$samples" <<'PY' || exit 1
import ast, sys
raw = open(sys.argv[1], "rb").read()
n = int.from_bytes(raw[8:10], "little")
header = ast.literal_eval(raw[10:10 + n].decode("latin1"))
shape = header["shape"]
row = (len(raw) - 10 - n) // shape[0]
header["shape"] = (16,) + tuple(shape[1:])
text = repr(header).encode("latin1")
text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
open(sys.argv[2], "wb").write(raw[:8] + len(text).to_bytes(2, "little") + text + raw[10 + n:10 + n + 16 * row])
PY

for platform in bernoulli2 bayes nash; do
  out=$work/$platform
  if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set platform=$platform --out "$out" --threads 2 >"$out.log" 2>&1; then
    fail "$platform: bpu_ptq.toml failed: $(tail -3 "$out.log")"
    continue
  fi
  for artifact in $artifacts; do
    [ -s "$out/$artifact" ] || fail "$platform: $artifact missing or empty"
  done
  # The sample meets the default target-cosine as plain int8: the search changes nothing.
  grep -q "precision search: cosine .* no change needed" "$out.log" ||
    fail "$platform: the precision search changed the sample: $(grep "precision search" "$out.log")"
  python3 - "$out/verify_result.json" "$platform" <<'PY' || fail "$platform: verify result out of bounds"
import json, sys
result = json.load(open(sys.argv[1]))
ok = result["samples"] == 16 and result["bit_identical"]
for o in result["outputs"]:
    ok = ok and o["exact_matches"] == o["compared"] > 0 and o["hbm_cosine_min"] > 0.99 and o["bc_cosine_min"] > 0.99
    print("%s %s: cos(hbm, ptq) min %.6f, max |hbm - ptq| %.4g, exact %d/%d" % (
        sys.argv[2], o["name"], o["hbm_cosine_min"], o["hbm_max_abs_error"], o["exact_matches"], o["compared"]))
sys.exit(0 if ok else 1)
PY
  if ! "$qflow" hbm run "$out/fashion_mnist.hbm" --input "$samples" --output-dir "$out/hbm_run" >"$out.hbm.log" 2>&1; then
    fail "$platform: qflow hbm run failed: $(tail -3 "$out.hbm.log")"
  elif ! "$qflow" infer "$out/fashion_mnist_quantized_model.bc" --input "$samples" --output-dir "$out/bc_run" \
      >"$out.bc.log" 2>&1; then
    fail "$platform: qflow infer .bc failed: $(tail -3 "$out.bc.log")"
  elif ! "$qflow" infer "$out/fashion_mnist.hbm" --input "$samples" --output-dir "$out/hbm_infer" \
      >"$out.hbm_infer.log" 2>&1; then
    fail "$platform: qflow infer .hbm failed: $(tail -3 "$out.hbm_infer.log")"
  else
    cmp -s "$out/hbm_run/logits.npy" "$out/bc_run/logits.npy" || fail "$platform: hbm run and infer .bc outputs differ"
    cmp -s "$out/hbm_run/logits.npy" "$out/hbm_infer/logits.npy" || fail "$platform: hbm run and infer .hbm outputs differ"
  fi
  [ $platform = bernoulli2 ] || continue
  again=$work/$platform.again
  if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set platform=$platform --out "$again" --threads 1 >"$again.log" 2>&1; then
    fail "$platform: second run failed: $(tail -3 "$again.log")"
  else
    for artifact in fashion_mnist_quantized_model.bc fashion_mnist.hbm; do
      cmp -s "$out/$artifact" "$again/$artifact" || fail "$platform: $artifact differs between runs"
    done
  fi
done
# qflow verify on the files of one run passes; with the .hbm of another platform (whose
# arithmetic differs: bernoulli2 runs Clip on the CPU) it reports the difference and fails.
nash=$work/nash bern=$work/bernoulli2
if [ -s "$nash/fashion_mnist.hbm" ] && [ -s "$bern/fashion_mnist.hbm" ]; then
  "$qflow" verify "$nash/fashion_mnist_ptq_model.onnx" --bc "$nash/fashion_mnist_quantized_model.bc" \
    --hbm "$nash/fashion_mnist.hbm" --data "$samples" --out "$work/verify_same" >"$work/verify_same.log" 2>&1 ||
    fail "qflow verify on one run's files failed: $(tail -2 "$work/verify_same.log")"
  grep -q "bit-identical to the .bc simulator on every sample" "$work/verify_same.log" ||
    fail "qflow verify did not report bit-identity: $(cat "$work/verify_same.log")"
  "$qflow" verify "$nash/fashion_mnist_ptq_model.onnx" --bc "$nash/fashion_mnist_quantized_model.bc" \
    --hbm "$bern/fashion_mnist.hbm" --data "$samples" --out "$work/verify_mixed" >"$work/verify_mixed.log" 2>&1
  status=$?
  [ $status = 2 ] || fail "qflow verify with another platform's .hbm exited $status, expected 2"
  grep -q "qflow: error: verify: the .hbm runtime differs from the .bc simulator" "$work/verify_mixed.log" ||
    fail "qflow verify with another platform's .hbm: $(tail -2 "$work/verify_mixed.log")"
fi
[ $failed = 0 ] && echo "bpu_ptq.toml: all platforms verified"
exit $failed
