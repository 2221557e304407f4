#!/bin/bash
# `qflow sensitivity` and `qflow compare --qparams` under quantization settings: int16
# activations (given with --set quantization.activation-dtype=int16 or with a pipeline file's
# [quantization] table, which must agree) bring every activation closer to the float model
# than the int8 table does; misused options fail with one line.
#
# usage: check_quantization_settings.sh QFLOW DATA_DIR WORK_DIR
set -u
qflow=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
model=$data/accuracy/sample_float.onnx table=$data/accuracy/calibration_table.json
samples=$data/../../../models/sample/input.npy
printf '[quantization]\nactivation-dtype = "int16"\n\n[[stage]]\nid = "import"\nuse = "import-onnx"\noptions = { path = "m.onnx" }\n' \
  >"$work/int16.toml"

run() {  # run OUT ARGS...: qflow with its stdout in OUT
  local out=$1; shift
  "$qflow" "$@" >"$out" 2>"$out.err" || { cat "$out.err"; fail "qflow $*"; }
}
common=(--data "$samples" --limit 3 --threads 2 --json)
run "$work/s8.json" sensitivity "$model" --qparams "$table" "${common[@]}" --out "$work/s8"
run "$work/s16.json" sensitivity "$model" --qparams "$table" "${common[@]}" --out "$work/s16" \
  --set quantization.activation-dtype=int16
run "$work/p16.json" sensitivity "$model" --qparams "$table" "${common[@]}" --out "$work/p16" --pipeline "$work/int16.toml"
run "$work/c8.json" compare "$model" --qparams "$table" "${common[@]}" --out "$work/c8"
run "$work/c16.json" compare "$model" --qparams "$table" "${common[@]}" --out "$work/c16" \
  --set quantization.activation-dtype=int16
run "$work/c16p.json" compare "$model" --qparams "$table" "${common[@]}" --out "$work/c16p" --pipeline "$work/int16.toml"

cmp -s "$work/s16.json" "$work/p16.json" || fail "sensitivity: --set and --pipeline give different results"
cmp -s "$work/c16.json" "$work/c16p.json" || fail "compare: --set and --pipeline give different results"
cmp -s "$work/s8.json" "$work/s16.json" && fail "sensitivity: int16 activations changed nothing"
cmp -s "$work/c8.json" "$work/c16.json" && fail "compare: int16 activations changed nothing"
python3 - "$work" <<'PY' || fail "int16 activations are not closer to the float model than int8"
import json, sys
w = sys.argv[1]
def activations(name):
    rows = json.load(open(f"{w}/{name}"))["ranking"]
    return {r["node"]: r["activation_cosine"] for r in rows if r["activation_cosine"] is not None}
s8, s16 = activations("s8.json"), activations("s16.json")
assert s8.keys() == s16.keys() and s8, (s8, s16)
for node in s8:
    assert s16[node] >= s8[node], (node, s8[node], s16[node])
assert min(s16.values()) > min(s8.values()), (min(s8.values()), min(s16.values()))
def layers(name):
    return {r["tensor"]: r["accumulated"]["cosine"] for r in json.load(open(f"{w}/{name}"))["tensors"]}
c8, c16 = layers("c8.json"), layers("c16.json")
assert c8.keys() == c16.keys() and c8, (c8, c16)
assert min(c16.values()) > min(c8.values()), (min(c8.values()), min(c16.values()))
PY

expect_error() {  # expect_error MESSAGE ARGS...
  local message=$1; shift
  "$qflow" "$@" >/dev/null 2>"$work/err" && fail "accepted: qflow $*"
  grep -qF -- "$message" "$work/err" || { cat "$work/err"; fail "expected '$message' from qflow $*"; }
}
expect_error "--set name=x: only quantization.KEY=VALUE applies here" \
  sensitivity "$model" --qparams "$table" --data "$samples" --out "$work/e" --set name=x
expect_error "--set quantization.activation-dtyp=int16: unknown quantization key 'activation-dtyp'" \
  sensitivity "$model" --qparams "$table" --data "$samples" --out "$work/e" --set quantization.activation-dtyp=int16
expect_error "compare: --pipeline and --set apply to --qparams only" \
  compare "$model" "$data/accuracy/sample_ptq.onnx" --data "$samples" --out "$work/e" --set quantization.activation-dtype=int16
expect_error "compare: give either QDQ.onnx or --qparams TABLE.json" compare "$model" --data "$samples" --out "$work/e"
exit $failed
