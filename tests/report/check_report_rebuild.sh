#!/bin/bash
# `qflow report OUT_DIR` on a finished pipelines/bpu_ptq.toml run with --save-intermediate
# rebuilds the report stage's report.html byte for byte (the same records and artifacts) and
# writes report.md with every section (a default run: all but the histograms, with a note); run from another folder, where the dataset path does not resolve, it still writes
# both pages with a note instead of the layer comparison.
#
# usage: check_report_rebuild.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

out=$work/run
if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set verify.limit=16 --out "$out" >"$work/run.log" 2>&1; then
  echo "FAIL: bpu_ptq.toml failed: $(tail -3 "$work/run.log")"
  exit 1
fi
# A default run keeps the statistics in memory: the rebuilt page has everything but the
# histograms, and the command says so.
"$qflow" report "$out" >"$work/report.log" 2>&1 || fail "qflow report failed: $(tail -3 "$work/report.log")"
grep -q "did not write its statistics: no histograms" "$work/report.log" ||
  fail "qflow report on a run without its statistics must say why the histograms are missing: $(cat "$work/report.log")"

# With --save-intermediate the statistics are on disk and the rebuilt page has the histograms too.
full=$work/full
if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set verify.limit=16 --out "$full" --save-intermediate >"$work/full.log" 2>&1; then
  fail "bpu_ptq.toml --save-intermediate failed: $(tail -3 "$work/full.log")"
else
  cp "$full/report.html" "$work/full_stage_report.html"
  "$qflow" report "$full" >"$work/full_report.log" 2>&1 || fail "qflow report (full) failed: $(tail -3 "$work/full_report.log")"
  cmp -s "$full/report.html" "$work/full_stage_report.html" || fail "qflow report's report.html differs from the stage's (--save-intermediate)"
  out=$full
fi
for heading in "## Summary" "## Stages" "## Placement" "## Per-layer error" "## Histograms" "## Sensitivity" \
  "## Precision decisions" "## Verify" \
  "## Performance estimate"; do
  grep -qx "$heading" "$out/report.md" || fail "report.md has no '$heading'"
done
grep -q '^| worst layer cosine | 0\.9' "$out/report.md" || fail "report.md has no worst layer cosine"

mkdir -p "$work/elsewhere" && cp -r "$out" "$work/elsewhere/run"
(cd "$work/elsewhere" && "$qflow" report run >"$work/elsewhere.log" 2>&1) ||
  fail "qflow report from another folder failed: $(tail -3 "$work/elsewhere.log")"
grep -q "No layer comparison: the dataset of stage 'data' cannot be opened from here" "$work/elsewhere/run/report.md" ||
  fail "report.md from another folder has no note about the dataset"
[ $failed = 0 ] && echo "qflow report: report.html identical to the stage's, report.md complete"
exit $failed
