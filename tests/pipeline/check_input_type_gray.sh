#!/bin/bash
# A uint8 input compiled into the model (docs/input-types.md): pipelines/bpu_ptq.toml on the
# MobileNet Fashion-MNIST fixture with input-type-rt = gray and the fixture's normalization
# (x / 255 - 0.2860) / 0.3530 as mean-value / scale-value. Checks: the check report shows the
# input chain; verify (frames made from the calibration samples) is bit-identical .bc / .hbm
# and close to the PTQ model; `qflow hbm run`, `qflow hbm run --quantized`, `qflow infer x.hbm`
# and `qflow infer x.bc` take uint8 [N, 28, 28, 1] arrays and give byte-identical outputs whose
# top-1 agrees with the float model on the float samples; the lowered input is u8 and its
# first op input_convert; a float array is refused with the dtype it expects. Then NCHW frames
# with an integer mean: folded into the first conv, no conversion op left.
#
# usage: check_input_type_gray.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

out=$work/out
if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/mobilenet_fashion/mobilenet_fashion.onnx \
    --set data=models/mobilenet_fashion/calib_200.npy --set method=max --set name=m \
    --set input-type-rt=gray --set mean-value=72.93 --set scale-value=0.011109259 \
    --out "$out" --threads 2 >"$work/run.log" 2>&1; then
  echo "FAIL: bpu_ptq.toml with input-type-rt=gray failed: $(tail -3 "$work/run.log")"
  exit 1
fi
grep -q "m_quantized_model.bc" "$out/lower.deployable.json" 2>/dev/null || ls "$out" >/dev/null
grep -q "^inputs:" "$out/model_check_result.txt" || fail "model_check_result.txt has no inputs section"
grep -q "input: gray nhwc uint8 \[1, 28, 28, 1\] -> gray float \[1, 1, 28, 28\]" "$out/model_check_result.txt" ||
  fail "model_check_result.txt lacks the input chain: $(grep -A4 '^inputs:' "$out/model_check_result.txt")"
grep -q '"type_rt": "gray"' "$out/model_check_result.json" || fail "model_check_result.json lacks \"inputs\""
grep -q "input input" "$out/report.html" || fail "report.html does not show the input chain"

python3 - "$out/verify_result.json" <<'PY' || fail "verify result out of bounds"
import json, sys
result = json.load(open(sys.argv[1]))
ok = result["samples"] == 16 and result["bit_identical"]
for o in result["outputs"]:
    ok = ok and o["exact_matches"] == o["compared"] > 0 and o["hbm_cosine_min"] > 0.98
    print("%s: cos(hbm, ptq) min %.6f, exact %d/%d" % (o["name"], o["hbm_cosine_min"], o["exact_matches"], o["compared"]))
sys.exit(0 if ok else 1)
PY

# 32 frames: the first calibration samples back in pixels (uint8 [32, 28, 28, 1]) and the
# float samples they stand for, written without numpy.
python3 - models/mobilenet_fashion/calib_200.npy "$work" <<'PY' || exit 1
import ast, struct, sys
raw = open(sys.argv[1], "rb").read()
n = int.from_bytes(raw[8:10], "little")
header = ast.literal_eval(raw[10:10 + n].decode("latin1"))
count, size = 32, 28 * 28
floats = struct.unpack("<%df" % (count * size), raw[10 + n:10 + n + 4 * count * size])
pixels = bytes(max(0, min(255, round((x * 0.3530 + 0.2860) * 255))) for x in floats)
exact = [struct.unpack("<f", struct.pack("<f", (p / 255 - 0.2860) / 0.3530))[0] for p in pixels]
def write(path, descr, shape, data):
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data)
write(sys.argv[2] + "/frames.npy", "|u1", (count, 28, 28, 1), pixels)
write(sys.argv[2] + "/samples.npy", "<f4", (count, 1, 28, 28), struct.pack("<%df" % len(exact), *exact))
PY

"$qflow" hbm run "$out/m.hbm" --input "$work/frames.npy" --output-dir "$work/hbm" >"$work/hbm.log" 2>&1 ||
  fail "qflow hbm run on uint8 frames failed: $(tail -3 "$work/hbm.log")"
"$qflow" hbm run "$out/m.hbm" --input "$work/frames.npy" --output-dir "$work/hbm_q" --quantized >"$work/hbm_q.log" 2>&1 ||
  fail "qflow hbm run --quantized on uint8 frames failed: $(tail -3 "$work/hbm_q.log")"
"$qflow" infer "$out/m.hbm" --input "$work/frames.npy" --output-dir "$work/infer_hbm" >"$work/infer_hbm.log" 2>&1 ||
  fail "qflow infer m.hbm on uint8 frames failed: $(tail -3 "$work/infer_hbm.log")"
"$qflow" infer "$out/m_quantized_model.bc" --input "$work/frames.npy" --output-dir "$work/infer_bc" >"$work/infer_bc.log" 2>&1 ||
  fail "qflow infer m_quantized_model.bc on uint8 frames failed: $(tail -3 "$work/infer_bc.log")"
"$qflow" infer models/mobilenet_fashion/mobilenet_fashion.onnx --input "$work/samples.npy" --output-dir "$work/float" \
  >"$work/float.log" 2>&1 || fail "qflow infer of the float model failed: $(tail -3 "$work/float.log")"
for d in hbm_q infer_hbm infer_bc; do
  for f in "$work/hbm"/*.npy; do
    cmp -s "$f" "$work/$d/$(basename "$f")" || fail "$d/$(basename "$f") differs from qflow hbm run's"
  done
done
python3 - "$work/hbm" "$work/float" <<'PY' || fail "top-1 of the uint8 .hbm disagrees with the float model"
import ast, glob, os, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[8:10], "little")
    shape = ast.literal_eval(raw[10:10 + n].decode("latin1"))["shape"]
    values = struct.unpack("<%df" % (len(raw[10 + n:]) // 4), raw[10 + n:])
    return [values[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
name = os.path.basename(glob.glob(sys.argv[1] + "/*.npy")[0])
a, b = load(sys.argv[1] + "/" + name), load(sys.argv[2] + "/" + name)
agree = sum(max(range(len(x)), key=x.__getitem__) == max(range(len(y)), key=y.__getitem__) for x, y in zip(a, b))
print("top-1 agreement .hbm (uint8 frames) vs float: %d/%d" % (agree, len(a)))
sys.exit(0 if agree >= len(a) - 1 else 1)
PY

# The .hbm's input is a uint8 frame: a float array is refused naming the dtype it expects.
"$qflow" hbm run "$out/m.hbm" --input "$work/samples.npy" --output-dir "$work/bad" >"$work/bad.log" 2>&1 &&
  fail "qflow hbm run accepted float samples for a uint8 input"
grep -q "uint8" "$work/bad.log" || fail "the refusal does not name uint8: $(cat "$work/bad.log")"
"$qflow" hbm info "$out/m.hbm" >"$work/info.log" 2>&1 || fail "qflow hbm info failed"
grep -q "input_convert" "$work/info.log" || fail "qflow hbm info does not list input_convert: $(head -30 "$work/info.log")"

# NCHW gray frames with an integer mean fold into the first conv: no input_convert, no
# quantize; the frame is the first layer's input (scale 0.011109259, zero point 73).
fold=$work/fold
if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/mobilenet_fashion/mobilenet_fashion.onnx \
    --set data=models/mobilenet_fashion/calib_200.npy --set method=max --set name=m \
    --set input-type-rt=gray --set input-layout-rt=nchw --set mean-value=73 --set scale-value=0.011109259 \
    --out "$fold" --threads 2 >"$work/fold.log" 2>&1; then
  fail "bpu_ptq.toml with a foldable gray input failed: $(tail -3 "$work/fold.log")"
else
  grep -q "folded:        into the first layer" "$fold/model_check_result.txt" ||
    fail "the foldable input was not folded: $(grep folded "$fold/model_check_result.txt")"
  "$qflow" hbm info "$fold/m.hbm" >"$work/fold_info.log" 2>&1
  grep -q "input  uint8 \[1, 1, 28, 28\]  NCHW" "$work/fold_info.log" || fail "the folded .hbm's input: $(grep -A1 '^inputs:' "$work/fold_info.log")"
  grep -qE "input_convert| quantize x" "$work/fold_info.log" && fail "the folded .hbm still converts its input"
  python3 - "$fold/verify_result.json" <<'PY' || fail "verify of the folded input out of bounds"
import json, sys
result = json.load(open(sys.argv[1]))
ok = result["bit_identical"] and all(o["hbm_cosine_min"] > 0.98 for o in result["outputs"])
print("folded: bit-identical %s, cos(hbm, ptq) min %.6f" % (result["bit_identical"], min(o["hbm_cosine_min"] for o in result["outputs"])))
sys.exit(0 if ok else 1)
PY
  python3 - "$work/frames.npy" "$work/frames_nchw.npy" <<'PY' || exit 1
import sys
raw = open(sys.argv[1], "rb").read()
n = int.from_bytes(raw[8:10], "little")
text = repr({"descr": "|u1", "fortran_order": False, "shape": (32, 1, 28, 28)}).encode("latin1")
text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
open(sys.argv[2], "wb").write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + raw[10 + n:])
PY
  "$qflow" hbm run "$fold/m.hbm" --input "$work/frames_nchw.npy" --output-dir "$work/fold_hbm" >"$work/fold_hbm.log" 2>&1 ||
    fail "qflow hbm run of the folded .hbm failed: $(tail -3 "$work/fold_hbm.log")"
  "$qflow" infer "$fold/m_quantized_model.bc" --input "$work/frames_nchw.npy" --output-dir "$work/fold_bc" >"$work/fold_bc.log" 2>&1 ||
    fail "qflow infer of the folded .bc failed: $(tail -3 "$work/fold_bc.log")"
  for f in "$work/fold_hbm"/*.npy; do
    cmp -s "$f" "$work/fold_bc/$(basename "$f")" || fail "folded: .hbm and .bc outputs differ"
  done
fi

[ $failed -eq 0 ] && echo "input-type-rt gray: OK"
exit $failed
