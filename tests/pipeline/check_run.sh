#!/bin/bash
# Runs pipelines/calibrate_minmax.toml with 1, 2 and 3 threads and --save-intermediate: each
# manifest's artifacts exist with the recorded size and SHA-256, and all runs give
# byte-identical artifacts. Without --save-intermediate the folder holds exactly the files the
# manifest names. Then a run whose data stage fails keeps the completed artifact and lists only it.
#
# usage: check_run.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# Values of one key inside the manifest's "artifact" objects (options may reuse the names).
artifact_field() {
  awk -v key="\"$2\":" '/"artifact": \{/ {inside = 1; next} inside && /\}/ {inside = 0}
    inside && $1 == key {v = $2; gsub(/[",]/, "", v); print v}' "$1"
}
# Values of a stage-level key ("id"), which only stages have.
field() { sed -n "s/^ *\"$2\": \"\([^\"]*\)\",\{0,1\}$/\1/p" "$1"; }

for threads in 1 2 3; do
  out=$work/threads$threads
  if ! "$qflow" run pipelines/calibrate_minmax.toml --out "$out" --threads "$threads" --save-intermediate >"$out.log" 2>&1; then
    fail "run with --threads $threads failed: $(cat "$out.log")"
    continue
  fi
  paths=($(artifact_field "$out/manifest.json" path))
  sums=($(artifact_field "$out/manifest.json" sha256))
  sizes=($(artifact_field "$out/manifest.json" bytes))
  [ "${#paths[@]}" = 7 ] || fail "--threads $threads: manifest lists ${#paths[@]} artifacts, expected 7"
  for i in "${!paths[@]}"; do
    file=$out/${paths[$i]}
    [ -f "$file" ] || { fail "missing artifact $file"; continue; }
    actual=$(sha256sum "$file" | cut -d' ' -f1)
    [ "$actual" = "${sums[$i]}" ] || fail "$file: sha256 $actual, manifest says ${sums[$i]}"
    [ "$(stat -c %s "$file")" = "${sizes[$i]}" ] || fail "$file: size differs from the manifest"
  done
  artifact_field "$out/manifest.json" sha256 >"$out.sums"
done
# The pass stage records its effect next to its counters.
for key in nodes_before nodes_after pass_seconds; do
  grep -q "\"$key\": " "$work/threads1/manifest.json" || fail "the manifest's pass stage must record $key"
done
for threads in 2 3; do
  cmp -s "$work/threads1.sums" "$work/threads$threads.sums" || fail "artifacts of --threads $threads differ from --threads 1"
done

# Without --save-intermediate: only what the pipeline names (the dataset and the statistics
# stay in memory), every stage still in the manifest with its artifact's hash.
out=$work/named
if "$qflow" run pipelines/calibrate_minmax.toml --out "$out" --threads 1 >"$out.log" 2>&1; then
  listed=$(python3 -c '
import json, sys
stages = json.load(open(sys.argv[1]))["stages"]
names = ["manifest.json"] + [s["artifact"]["path"] for s in stages if "path" in s["artifact"]]
names += [f for s in stages for f in s.get("side_files", [])]
print(" ".join(sorted(names)))' "$out/manifest.json")
  present=$(ls "$out" | sort | tr '\n' ' ' | sed 's/ $//')
  [ "$listed" = "$present" ] || fail "without --save-intermediate the folder holds '$present', the manifest names '$listed'"
  [ ! -e "$out/data.dataset.json" ] && [ ! -e "$out/observe.statistics.json" ] ||
    fail "without --save-intermediate the dataset and statistics must not be written"
  cmp -s <(artifact_field "$out/manifest.json" sha256) "$work/threads1.sums" ||
    fail "the manifest's hashes must not depend on --save-intermediate"
else
  fail "run without --save-intermediate failed: $(cat "$out.log")"
fi

out=$work/failing
"$qflow" run pipelines/calibrate_minmax.toml --out "$out" --threads 1 --save-intermediate --set model=no_such.onnx >"$out.log" 2>"$out.err"
[ $? = 2 ] || fail "a failing stage must exit with 2"
grep -q "stage 'import' (import-onnx) failed" "$out.err" || fail "the error must name the stage: $(cat "$out.err")"
grep -q '"complete": false' "$out/manifest.json" || fail "the manifest of a failed run must say complete: false"
[ "$(field "$out/manifest.json" id | tr '\n' ' ')" = "data " ] || fail "the manifest must list only the completed stage 'data'"
[ -f "$out/data.dataset.json" ] || fail "the completed stage's artifact must stay"
[ ! -e "$out/sample_original_float_model.onnx" ] || fail "the failed stage must leave no artifact"

[ "$failed" = 0 ] && echo "PASS determinism_and_failure"
exit "$failed"
