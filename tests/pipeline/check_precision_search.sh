#!/bin/bash
# The precision search on a model where plain int8 loses accuracy
# (models/fashion_mnist/fashion_mnist_outlier.onnx, tools/make_outlier_fixture.py):
# pipelines/bpu_ptq.toml on nash reaches the target cosine with at most 10% of the quantized
# tensors raised, the decisions are in manifest.json and report.md, and the overrides it
# writes, pasted into the pipeline's [quantization] without the search's input on the PTQ
# stage, give the same PTQ model bytes. `percentile` calibration clips at 8 bits; a tensor
# raised to int16 takes its observed range whether the search or the calibrator computes it.
#
# usage: check_precision_search.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

target=0.99
common=(--set model=models/fashion_mnist/fashion_mnist_outlier.onnx --set data=models/fashion_mnist/calib_200.npy --set method=percentile --set platform=nash
        --set target-cosine=$target --threads 2)
searched=$work/searched
if ! "$qflow" run pipelines/bpu_ptq.toml "${common[@]}" --out "$searched" >"$searched.log" 2>&1; then
  echo "FAIL: the search run failed: $(tail -5 "$searched.log")"
  exit 1
fi
grep -F "precision search: cosine" "$searched.log" || fail "no precision summary printed"

python3 - "$searched" "$target" <<'PY' || fail "precision result out of bounds"
import json, sys
out, target = sys.argv[1], float(sys.argv[2])
p = json.load(open(out + "/precision.json"))
share = p["raised_tensors"] / p["quantized_tensors"]
print("before %.6f after %.6f target %.6f; %d node changes, %d of %d tensors raised (%.1f%%), %d evaluations" % (
    p["before"], p["after"], target, len(p["changes"]), p["raised_tensors"], p["quantized_tensors"], 100 * share,
    p["evaluations"]))
for c in p["changes"]:
    print("  %s %s: %s -> %s %s (sensitivity %.6f, after %.6f)" % (
        c["node"], c["op_type"], c["from"], c["to"], ",".join(c["tensors"]), c["sensitivity"], c["value_after"]))
ok = p["before"] < target <= p["after"] and 0 < share <= 0.10
manifest = json.load(open(out + "/manifest.json"))
stage = [s for s in manifest["stages"] if s["id"] == "precision"][0]
ok = ok and stage["precision"]["changes"] == p["changes"] and stage["side_files"] == ["precision_overrides.toml"]
verify = json.load(open(out + "/verify_result.json"))
ok = ok and verify["bit_identical"]
sys.exit(0 if ok else 1)
PY

toml=$searched/precision_overrides.toml
grep -q '^\[quantization.node.' "$toml" || fail "precision_overrides.toml has no node table: $(cat "$toml")"
"$qflow" report "$searched" >/dev/null 2>&1 || fail "qflow report failed"
grep -q "^## Precision decisions" "$searched/report.md" || fail "report.md has no precision section"
grep -q "int8 → int16" "$searched/report.md" || fail "report.md lists no int16 decision"

# Replay: the fragment under [quantization], the PTQ stage without input 'precision'.
python3 - pipelines/bpu_ptq.toml "$toml" "$work/replay.toml" <<'PY' || exit 1
import sys
text = open(sys.argv[1]).read()
fragment = "".join(line for line in open(sys.argv[2]) if not line.startswith("#"))
head = "per-channel = true\n"
searched = ', precision = "precision.report", statistics = "observe.statistics" }\noutput = "${name}_ptq_model.onnx"'
assert head in text and searched in text
text = text.replace(head, head + "\n" + fragment, 1)
text = text.replace(searched, ' }\noutput = "${name}_ptq_model.onnx"')
open(sys.argv[3], "w").write(text)
PY
replayed=$work/replayed
if ! "$qflow" run "$work/replay.toml" "${common[@]}" --out "$replayed" >"$replayed.log" 2>&1; then
  fail "the replay run failed: $(tail -5 "$replayed.log")"
else
  cmp -s "$searched/fashion_mnist_outlier_ptq_model.onnx" "$replayed/fashion_mnist_outlier_ptq_model.onnx" ||
    fail "the replayed PTQ model differs from the searched one"
  grep -F "no change needed" "$replayed.log" >/dev/null || fail "the replayed run still searched"
fi

# The searched ranges come from the statistics: a PTQ stage without them is refused.
sed 's|, precision = "precision.report", statistics = "observe.statistics" }|, precision = "precision.report" }|' \
  pipelines/bpu_ptq.toml >"$work/no_statistics.toml"
if "$qflow" run "$work/no_statistics.toml" "${common[@]}" --out "$work/no_statistics" >"$work/no_statistics.log" 2>&1; then
  fail "a PTQ stage without the search's statistics was accepted"
else
  grep -F "stage 'ptq': input 'precision' raised activations to their observed ranges; give this stage the same input 'statistics'" \
    "$work/no_statistics.log" >/dev/null || fail "no statistics error: $(tail -2 "$work/no_statistics.log")"
fi

[ $failed = 0 ] && echo "precision search: ok"
exit $failed
