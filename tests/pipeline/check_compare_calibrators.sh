#!/bin/bash
# pipelines/compare_calibrators.toml on the Fashion-MNIST sample: the table names every branch
# with an output cosine in (0, 1]; with the top1 metric on the calibration labels every
# branch and the float model get a value in [0, 1]; 1 and 2 threads give the same figures
# (the calibration times aside); a plugin calibrator given with --plugin/--set takes the
# candidate branch; a metric typo fails before anything runs.
#
# usage: check_compare_calibrators.sh QFLOW SOURCE_DIR WORK_DIR TEST_PLUGIN.so
set -u
qflow=$1 source_dir=$2 work=$3 plugin=$4
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }
pipeline=pipelines/compare_calibrators.toml
fashion=(--set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy)
metric=(--set compare.metric=top1 --set compare.metric-options=labels=models/fashion_mnist/calib_200_labels.npy)

# Rows of a table: "branch method cosine [metric] seconds", header lines skipped.
rows() { awk '/^branch /{on=1; next} on' "$1"; }
# The table without its last column (the calibration time, which varies run to run).
untimed() { rows "$1" | awk '{ $NF = ""; print }'; }

for threads in 1 2; do
  "$qflow" run "$pipeline" "${fashion[@]}" --out "$work/t$threads" --threads "$threads" "${metric[@]}" >"$work/t$threads.log" 2>&1 ||
    { cat "$work/t$threads.log"; fail "run with --threads $threads failed"; }
done
table=$work/t1/calibrators_compare.txt
[ -s "$table" ] || fail "no calibrators_compare.txt"
[ -s "$work/t1/calibrators_compare.json" ] || fail "no calibrators_compare.json"
grep -q "^metric top1 of the float model: " "$table" || fail "no float top1 line in the table"
for branch in max:max kl:kl mse:mse percentile:percentile candidate:mix; do
  label=${branch%%:*} method=${branch#*:}
  rows "$table" | awk -v l="$label" -v m="$method" '$1 == l && $2 == m { found = 1 } END { exit !found }' ||
    fail "no row for branch $label ($method)"
done
[ "$(rows "$table" | wc -l)" = 5 ] || fail "expected 5 rows"
rows "$table" | awk '!($3 > 0 && $3 <= 1) { bad = 1 } !($4 >= 0 && $4 <= 1) { bad = 1 } END { exit bad }' ||
  fail "a cosine outside (0, 1] or a top1 outside [0, 1]"
# The table is printed after the stage's summary line, identical to the file.
grep -q "^branch  *method  *output_cos  *top1  *calibrate_s$" "$work/t1.log" || fail "the table is not on stdout"
[ "$(untimed "$table")" = "$(untimed "$work/t2/calibrators_compare.txt")" ] ||
  { diff <(untimed "$table") <(untimed "$work/t2/calibrators_compare.txt"); fail "1 and 2 threads differ"; }
grep -q '"side_files": \[ *"calibrators_compare.txt" *\]' "$work/t1/manifest.json" || fail "the manifest does not list the .txt"

# A plugin calibrator as the candidate, no metric.
"$qflow" run "$pipeline" "${fashion[@]}" --out "$work/plugin" --threads 2 --plugin "$plugin" --set candidate=fixed >"$work/plugin.log" 2>&1 ||
  { cat "$work/plugin.log"; fail "run with the plugin calibrator failed"; }
rows "$work/plugin/calibrators_compare.txt" | awk '$1 == "candidate" && $2 == "fixed" && $3 > 0 && $3 <= 1 { found = 1 } END { exit !found }' ||
  { cat "$work/plugin/calibrators_compare.txt"; fail "no candidate row for the plugin calibrator 'fixed' with a cosine in (0, 1]"; }

# Metric typos are refused by the resolver with one line.
"$qflow" run "$pipeline" "${fashion[@]}" --dry-run --set compare.metric=top2 >/dev/null 2>"$work/typo.err" && fail "unknown metric accepted"
grep -q "unknown metric 'top2' (metrics: argmax-agreement, ctc-agreement, top1, top5)" "$work/typo.err" || { cat "$work/typo.err"; fail "unknown metric message"; }
"$qflow" run "$pipeline" "${fashion[@]}" --dry-run --set compare.metric=top1 --set compare.metric-options=label=x.npy >/dev/null \
  2>"$work/key.err" && fail "unknown metric option accepted"
grep -q "option 'label' is not declared by metric 'top1'; did you mean 'labels'?" "$work/key.err" ||
  { cat "$work/key.err"; fail "unknown metric option message"; }
# A labels file cut short fails the stage, naming the file.
head -c 1000 models/fashion_mnist/calib_200_labels.npy >"$work/cut.npy"
"$qflow" run "$pipeline" "${fashion[@]}" --out "$work/cut" --set compare.metric=top1 --set compare.metric-options=labels="$work/cut.npy" \
  >/dev/null 2>"$work/cut.err" && fail "a truncated labels file accepted"
grep -q "cut.npy': truncated: 200 labels need 1600 bytes" "$work/cut.err" || { cat "$work/cut.err"; fail "truncated labels message"; }
exit $failed
