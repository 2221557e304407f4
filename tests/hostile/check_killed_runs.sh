#!/bin/bash
# Kills `qflow run pipelines/bpu_ptq.toml` with SIGKILL at several moments (fractions of a
# full run's time, and as soon as given artifacts appear) and checks after each kill that
# every file in the output folder is complete or absent (check_outputs.py --killed: listed
# artifacts match the manifest's size and SHA-256, .onnx files load, leftovers are only
# "<name>.tmp.<pid>" files). All kills reuse one folder, so each run also starts over the
# debris of the previous one; a last uninterrupted run there must remove every temporary
# file and reproduce the reference run's artifacts byte for byte.
#
# usage: check_killed_runs.sh QFLOW SOURCE_DIR WORK
set -u
qflow=$1 src=$2 work=$3
check=$src/tests/hostile/check_outputs.py
fail() { echo "FAIL killed_runs: $*"; exit 1; }
fashion=(--set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy)
run() { "$qflow" run pipelines/bpu_ptq.toml "${fashion[@]}" --threads 2 --out "$1" >/dev/null 2>&1; }
# In the background with $pid = qflow's own pid: `run ... &` would give the pid of a subshell,
# and killing that would leave qflow running and writing into the next run's folder.
start_run() { "$qflow" run pipelines/bpu_ptq.toml "${fashion[@]}" --threads 2 --out "$1" >/dev/null 2>&1 & pid=$!; }
listed() { /usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["stages"]))' "$1/manifest.json" 2>/dev/null || echo none; }

rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$src" || exit 1
start=$(date +%s%N)
run "$work/reference" || fail "the reference run failed"
total_ms=$(( ($(date +%s%N) - start) / 1000000 ))
/usr/bin/python3 "$check" "$qflow" "$work/reference" || fail "the reference run's folder"
stages=$(listed "$work/reference")
echo "reference run: ${total_ms} ms, $stages artifacts"

out=$work/killed
kill_and_check() {  # label; the run's pid is in $pid
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  /usr/bin/python3 "$check" "$qflow" "$out" --killed || fail "after the kill $1"
  temps=$(find "$out" -name '*.tmp.*' 2>/dev/null | wc -l)
  echo "killed $1: manifest lists $(listed "$out") artifacts, $temps temporary files"
}

for percent in 2 5 10 20 35 50 65 80 95; do
  start_run "$out"
  sleep "$(awk -v t="$total_ms" -v p="$percent" 'BEGIN { printf "%.3f", t * p / 100000 }')"
  kill_and_check "at ${percent}% of the reference time"
done

# As soon as an artifact appears (polled every 5 ms): the kill lands just after its rename.
for artifact in fashion_mnist_optimized_float_model.onnx calibration_table.json fashion_mnist.hbm; do
  rm -rf "$out"
  start_run "$out"
  for _ in $(seq 1 20000); do
    [ -e "$out/$artifact" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.005
  done
  [ -e "$out/$artifact" ] || fail "the run ended before $artifact appeared"
  kill_and_check "when $artifact appeared"
done

# A run over the debris of a killed one: no temporary file stays, artifacts as the reference.
start_run "$out"
sleep "$(awk -v t="$total_ms" 'BEGIN { printf "%.3f", t * 0.5 / 1000 }')"
kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
run "$out" || fail "the run after the kills failed"
/usr/bin/python3 "$check" "$qflow" "$out" --stages "$(/usr/bin/python3 -c 'import json,sys; print(",".join(s["id"] for s in json.load(open(sys.argv[1]))["stages"]))' "$work/reference/manifest.json")" ||
  fail "the completed run over the debris"
for f in "$work/reference"/*; do
  name=$(basename "$f")
  case $name in manifest.json|report.*) continue ;; esac
  cmp -s "$f" "$out/$name" || fail "$name differs from the reference run"
done
echo "PASS killed_runs"
