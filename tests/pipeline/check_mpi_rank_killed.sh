#!/bin/bash
# A rank of `mpirun --quiet -np 2 qflow run` killed (SIGKILL) while observing: every rank must be
# gone and mpirun must exit non-zero within 30 s, stderr must hold one line (the surviving
# rank's), and the output folder must hold no half-written file (no `.tmp.PID` left, a manifest that says the run is not complete). The run observes
# 20 000 generated samples on the MobileNet fixture, long enough (about 15 s on two ranks) to
# be killed in the middle.
# Skips (exit 77) with the reason when qflow was built without QFLOW_MPI or mpirun is missing.
#
# usage: check_mpi_rank_killed.sh QFLOW SOURCE_DIR WORK_DIR QFLOW_MPI(ON|OFF)
set -u
qflow=$1 source_dir=$2 work=$3 with_mpi=$4
source "$(dirname "$0")/mpi_test_setup.sh"
fail() { echo "FAIL: $*"; exit 1; }
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(7).standard_normal((20000, 1, 28, 28)).astype(np.float32))" \
  "$work/samples.npy" || fail "cannot write the samples"

out=$work/out
# --quiet: without Open MPI's own banners, what is printed on stderr is qflow's.
"${mpi[0]}" --quiet "${mpi[@]:1}" 2 "$qflow" run pipelines/ptq.toml --set model=models/mobilenet_fashion/mobilenet_fashion.onnx \
  --set data="$work/samples.npy" --set method=max --threads 1 --out "$out" >"$work/run.log" 2>"$work/run.err" &
launcher=$!
# Both ranks running, then one second into the run.
for _ in $(seq 1 300); do
  [ "$(pgrep -f -- "--out $out" | grep -vx "$launcher" | wc -l)" -ge 2 ] && break  # both ranks (not mpirun)
  sleep 0.1
done
sleep 1
# A rank of this job only (its output folder names it), never mpirun itself.
victim=$(pgrep -f -- "--out $out" | grep -vx "$launcher" | sort -n | tail -1)
[ -n "$victim" ] || fail "no rank to kill: $(cat "$work/run.log" "$work/run.err")"
kill -0 "$launcher" 2>/dev/null || fail "the run ended before a rank could be killed: $(cat "$work/run.log" "$work/run.err")"
start=$(date +%s.%N)
kill -9 "$victim"
code=0
for _ in $(seq 1 300); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  pkill -9 -f -- "--out $out"
  fail "mpirun still runs 30 s after a rank was killed"
fi
wait "$launcher"
code=$?
seconds=$(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }")
[ "$code" != 0 ] || fail "mpirun exited 0 after a rank was killed"
left=$(pgrep -f -- "--out $out" || true)
[ -z "$left" ] || fail "processes left after the job ended: $left"
if [ -d "$out" ]; then
  half=$(find "$out" -name '*.tmp.*')
  [ -z "$half" ] || fail "half-written files left: $half"
  if [ -f "$out/manifest.json" ]; then
    grep -q '"complete": false' "$out/manifest.json" || fail "the manifest of a killed run does not say it is incomplete"
  fi
fi
# One line: the surviving rank's, naming why it stopped.
lines=$(grep -c . "$work/run.err")
[ "$lines" = 1 ] || fail "expected one error line, got $lines: $(cat "$work/run.err")"
grep -q '^qflow: error: rank [01] of 2 stopped: mpirun ended the job because another rank stopped first' "$work/run.err" ||
  fail "the error line does not say why the rank stopped: $(cat "$work/run.err")"
echo "PASS: rank $victim killed; mpirun exited $code after $seconds s with one error line, no half-written file"
