#!/bin/bash
# pipelines/deploy.toml on the Fashion-MNIST sample for both targets:
#   bpu (the default): the artifacts of bpu_ptq.toml, and the same .bc and .hbm bytes (one
#     pipeline file, the same stages and quantization);
#   onnxruntime: the target's rule quantizes with reduce-range (said on stdout, int8 weights
#     of the PTQ model within [-64, 64]), <name>_ort_model.onnx is the PTQ model's bytes, no
#     BPU-only artifact is written, and the check section places Conv and Gemm in int8;
#   onnxruntime with the table overriding the rule (reduce-range = false): the lowering stage
#     fails naming the node and the remedy; on platform x86_64-vnni the same model lowers.
#
# usage: check_deploy.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }
model=models/fashion_mnist/fashion_mnist.onnx data=models/fashion_mnist/calib_200.npy

run() {  # out_dir log args...
  local out=$1 log=$2
  shift 2
  "$qflow" run pipelines/deploy.toml --set model=$model --set data=$data --out "$out" --threads 2 "$@" >"$log" 2>&1
}

# --- bpu -------------------------------------------------------------------------------------
if ! run "$work/bpu" "$work/bpu.log"; then
  fail "deploy.toml (bpu) failed: $(tail -3 "$work/bpu.log")"
else
  for artifact in fashion_mnist_ptq_model.onnx model_check_result.txt model_check_result.json \
      fashion_mnist_quantized_model.bc fashion_mnist.hbm verify_result.json model_perf.txt report.html; do
    [ -s "$work/bpu/$artifact" ] || fail "bpu: $artifact missing or empty"
  done
  grep -q "^quantization: target bpu asks for nothing" "$work/bpu.log" ||
    fail "bpu: no quantization line: $(grep '^quantization' "$work/bpu.log")"
  if ! "$qflow" run pipelines/bpu_ptq.toml --set model=$model --set data=$data --out "$work/bpu_ptq" --threads 2 \
      >"$work/bpu_ptq.log" 2>&1; then
    fail "bpu_ptq.toml failed: $(tail -3 "$work/bpu_ptq.log")"
  else
    for artifact in fashion_mnist_ptq_model.onnx fashion_mnist_quantized_model.bc fashion_mnist.hbm; do
      cmp -s "$work/bpu/$artifact" "$work/bpu_ptq/$artifact" || fail "bpu: $artifact differs from bpu_ptq.toml's"
    done
  fi
fi

# --- onnxruntime -------------------------------------------------------------------------------
ort=$work/ort
if ! run "$ort" "$work/ort.log" --set target=onnxruntime; then
  fail "deploy.toml (onnxruntime) failed: $(tail -3 "$work/ort.log")"
else
  grep -q "^quantization: target onnxruntime sets reduce-range = true$" "$work/ort.log" ||
    fail "onnxruntime: the rule was not applied: $(grep '^quantization' "$work/ort.log")"
  for artifact in fashion_mnist_ptq_model.onnx fashion_mnist_ort_model.onnx model_check_result.txt \
      model_check_result.json report.html; do
    [ -s "$ort/$artifact" ] || fail "onnxruntime: $artifact missing or empty"
  done
  for artifact in fashion_mnist_quantized_model.bc fashion_mnist.hbm verify_result.json model_perf.json; do
    [ -e "$ort/$artifact" ] && fail "onnxruntime: BPU artifact $artifact written"
  done
  cmp -s "$ort/fashion_mnist_ptq_model.onnx" "$ort/fashion_mnist_ort_model.onnx" ||
    fail "onnxruntime: the deployable is not the PTQ model"
  python3 - "$ort" <<'PY' || fail "onnxruntime: check section or deployable list out of bounds"
import json, sys
out = sys.argv[1]
check = json.load(open(out + "/model_check_result.json"))
nodes = check["nodes"]
ok = check["target"] == "onnxruntime" and check["accelerator"] == "int8" and check["platform"] == "x86_64"
weighted = [n for n in nodes if n["op_type"] in ("Conv", "Gemm")]
ok = ok and weighted and all(n["placement"] == "int8" for n in weighted)
ok = ok and check["summary"]["overflowing_units"] == 0 and check["summary"]["nodes"] == len(nodes)
manifest = json.load(open(out + "/manifest.json"))
lower = [s for s in manifest["stages"] if s["id"] == "lower"]
ok = ok and len(lower) == 1 and lower[0]["side_file_roles"] == {"fashion_mnist_ort_model.onnx": "onnx"}
stages = [s["id"] for s in manifest["stages"]]
ok = ok and "verify" not in stages and "perf" not in stages and "report" in stages
print("onnxruntime: %d nodes, %d int8 (%d Conv/Gemm), float op types %s" % (
    len(nodes), check["summary"]["int8_nodes"], len(weighted), check["summary"]["float_op_types"]))
sys.exit(0 if ok else 1)
PY
  grep -q 'nodes on INT8 / FLOAT' "$ort/report.html" ||
    fail "onnxruntime: the report does not label the placement INT8 / FLOAT"
fi

# The table overrides the rule: ONNX Runtime would overflow, and the lowering says so.
if run "$work/ort_full" "$work/ort_full.log" --set target=onnxruntime --set quantization.reduce-range=false; then
  fail "onnxruntime with full-range weights: the run passed"
else
  grep -q "stage 'lower' (target-lower:onnxruntime) failed: onnxruntime: node '.*' (Conv): weight range \[-127, 12[67]\] exceeds \[-64, 64\] of the u8s8 kernels on x86-64 CPUs without VNNI" "$work/ort_full.log" ||
    fail "onnxruntime with full-range weights: $(tail -2 "$work/ort_full.log")"
  grep -q "quantize with reduce-range = true" "$work/ort_full.log" || fail "onnxruntime: the refusal names no remedy"
  [ -e "$work/ort_full/fashion_mnist_ort_model.onnx" ] && fail "onnxruntime: the refused lowering left a file"
fi
if ! run "$work/ort_vnni" "$work/ort_vnni.log" --set target=onnxruntime --set platform=x86_64-vnni; then
  fail "onnxruntime on x86_64-vnni failed: $(tail -3 "$work/ort_vnni.log")"
else
  grep -q "^quantization: target onnxruntime asks for nothing" "$work/ort_vnni.log" ||
    fail "x86_64-vnni: $(grep '^quantization' "$work/ort_vnni.log")"
  [ -s "$work/ort_vnni/fashion_mnist_ort_model.onnx" ] || fail "x86_64-vnni: no deployable"
fi
# A user's own onnxruntime platform on $QFLOW_PLATFORM_PATH, as for the BPU's platforms.
mkdir -p "$work/user_platforms"
sed -e 's/^name = "x86_64"/name = "my-cpu"/' plugins/targets/onnxruntime/platforms/x86_64.toml \
  >"$work/user_platforms/my-cpu.toml"
if ! QFLOW_PLATFORM_PATH=$work/user_platforms run "$work/ort_user" "$work/ort_user.log" --set target=onnxruntime \
    --set platform=my-cpu; then
  fail "onnxruntime on a platform from QFLOW_PLATFORM_PATH failed: $(tail -3 "$work/ort_user.log")"
else
  grep -q '"platform": "my-cpu"' "$work/ort_user/model_check_result.json" ||
    fail "onnxruntime: the check section does not name the user's platform"
fi
[ $failed = 0 ] && echo "deploy.toml: bpu and onnxruntime targets checked"
exit $failed
