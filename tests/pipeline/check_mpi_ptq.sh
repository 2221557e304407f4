#!/bin/bash
# `mpirun -np 2` and `-np 4` of pipelines/ptq.toml and bpu_ptq.toml on the Fashion-MNIST fixture
# (bpu_ptq.toml also with a target that makes the sensitivity ranking and the precision search
# run) and a pipeline with the compare stage must write the statistics, calibration table,
# sensitivity, precision and per-layer results, QDQ models, verify result, .bc and .hbm
# (every artifact but the
# manifest and the report's wall times) byte-identical to one process (docs/distributed.md), a
# manifest naming the rank count, a failing run must end every rank instead of hanging, and
# ranks with different plugin sets are refused at start.
# Skips (exit 77) with the reason when qflow was built without QFLOW_MPI or mpirun is missing.
#
# usage: check_mpi_ptq.sh QFLOW SOURCE_DIR WORK_DIR QFLOW_MPI(ON|OFF)
set -u
qflow=$1 source_dir=$2 work=$3 with_mpi=$4
source "$(dirname "$0")/mpi_test_setup.sh"
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# report.html carries the stages' wall times, which differ between any two runs.
sums() { (cd "$1" && sha256sum $(ls | grep -v -e '^manifest.json$' -e '^report.html$' | sort)); }
artifacts=0
# bpu_search: bpu_ptq.toml with a target the plain PTQ model misses, so the sensitivity
# ranking (split between the ranks) and the precision search run.
# compare: the compare and sensitivity stages on the sample CNN (its samples split too).
for pipeline in ptq bpu_ptq bpu_search compare; do
  args=(run pipelines/${pipeline/bpu_search/bpu_ptq}.toml --set model=models/fashion_mnist/fashion_mnist.onnx
        --set data=models/fashion_mnist/calib_200.npy --threads 1 --save-intermediate)
  name=$pipeline.toml
  [ "$pipeline" = bpu_search ] && args+=(--set target-cosine=0.9999) && name="bpu_ptq.toml (target-cosine 0.9999)"
  [ "$pipeline" = compare ] && args=(run tests/pipeline/data/compare_stages.toml --threads 1) && name=compare_stages.toml
  start=$(date +%s.%N)
  if ! "$qflow" "${args[@]}" --out "$work/$pipeline.one" >"$work/$pipeline.one.log" 2>&1; then
    fail "the single-process $name run failed: $(cat "$work/$pipeline.one.log")"
    exit 1
  fi
  echo "$name, one process: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
  sums "$work/$pipeline.one" >"$work/$pipeline.one.sums"
  if [ "$pipeline" = compare ]; then
    grep -q compare_per_layer.json "$work/$pipeline.one.sums" || fail "the single-process $name run wrote no comparison"
  else
    grep -q calibration_table.json "$work/$pipeline.one.sums" && grep -q _ptq_model.onnx "$work/$pipeline.one.sums" &&
      grep -q _calibrated_model.onnx "$work/$pipeline.one.sums" || fail "the single-process $name run wrote no table or QDQ models"
  fi
  [ "$pipeline" = ptq ] || [ "$pipeline" = compare ] || grep -q '\.hbm$' "$work/$pipeline.one.sums" ||
    fail "the single-process $name run wrote no .hbm"
  if [ "$pipeline" = bpu_search ]; then
    grep -q '"node"' "$work/$pipeline.one/sensitivity.json" || fail "bpu_search: the sensitivity stage ranked no node"
    grep -q '"reached": true' "$work/$pipeline.one/precision.json" || fail "bpu_search: the precision search missed its target"
  fi
  artifacts=$((artifacts + $(wc -l <"$work/$pipeline.one.sums")))

  for ranks in 2 4; do
    out=$work/$pipeline.np$ranks
    start=$(date +%s.%N)
    if ! timeout 600 "${mpi[@]}" "$ranks" "$qflow" "${args[@]}" --out "$out" >"$out.log" 2>&1; then
      fail "$name under mpirun -np $ranks failed: $(cat "$out.log")"
      continue
    fi
    echo "$name, mpirun -np $ranks: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
    sums "$out" >"$out.sums"
    diff -u "$work/$pipeline.one.sums" "$out.sums" || fail "$name, mpirun -np $ranks: artifacts differ from one process"
    grep -q "\"ranks\": $ranks," "$out/manifest.json" || fail "$name, mpirun -np $ranks: manifest.json does not record $ranks ranks"
    # Rank 0 alone prints the run's lines: one "wrote" line for the manifest, not one per rank.
    [ "$(grep -c 'wrote .*manifest.json' "$out.log")" = 1 ] ||
      fail "$name, mpirun -np $ranks: expected one manifest line: $(cat "$out.log")"
  done
done

# load-data scanned in slices: a folder of three files (one empty), NaN rows to skip, and a
# limit the first window of rows misses by the skipped rows, so a second window is read. The
# dataset description and everything after it must be those of one process; without
# skip-nonfinite every rank must stop at the first NaN row, with one process's message.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
folder=$work/nan_folder
mkdir -p "$folder"
"$py" - "$folder" <<'PY' || fail "cannot write the NaN folder"
import sys, numpy as np
x = np.load("models/fashion_mnist/calib_200.npy")[:20].copy()
x[[2, 5, 12]] = np.nan
np.save(sys.argv[1] + "/a.npy", x[:9])
np.save(sys.argv[1] + "/b.npy", x[:0])
np.save(sys.argv[1] + "/c.npy", x[9:])
PY
scan=(run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data="$folder"
      --set method=max --threads 1 --save-intermediate)
for ranks in 1 2 4; do
  out=$work/scan.np$ranks
  launch=("${mpi[@]}" "$ranks")
  [ "$ranks" = 1 ] && launch=()
  timeout 300 "${launch[@]}" "$qflow" "${scan[@]}" --set data.skip-nonfinite=true --set data.limit=14 --out "$out" \
    >"$out.log" 2>&1 || fail "load-data with NaN rows, $ranks rank(s), failed: $(cat "$out.log")"
  sums "$out" >"$out.sums"
  [ "$ranks" = 1 ] || diff -u "$work/scan.np1.sums" "$out.sums" || fail "load-data with NaN rows, -np $ranks: artifacts differ"
  timeout 120 "${launch[@]}" "$qflow" "${scan[@]}" --out "$out.nan" >"$out.nan.log" 2>&1 &&
    fail "load-data without skip-nonfinite, $ranks rank(s), accepted NaN rows"
  grep -q "a.npy: sample 2 holds 784 NaN" "$out.nan.log" || fail "the NaN error, $ranks rank(s), does not name a.npy sample 2: $(cat "$out.nan.log")"
done
grep -q '"count": 14' "$work/scan.np1/"*dataset*.json 2>/dev/null || grep -rq '"count": 14' "$work/scan.np1" ||
  fail "the limited dataset does not hold 14 samples"

# One bad input fails the run on every rank; the job must end (non-zero), not hang, and
# (mpirun --quiet) print one error line, rank 0's. A rank that mpirun ends before it meets
# the error itself (a loaded machine: rank 0 got there first) adds its one-line notice of
# being ended; that line is not an error of its own.
if timeout 120 "${mpi[0]}" --quiet "${mpi[@]:1}" 2 "$qflow" run pipelines/ptq.toml \
     --set model=models/fashion_mnist/fashion_mnist.onnx --set data="$work/missing.npy" --threads 1 \
     --out "$work/bad" >"$work/bad.log" 2>"$work/bad.err"; then
  fail "mpirun with a missing data file succeeded"
else
  code=$?
  [ "$code" = 124 ] && fail "mpirun with a missing data file hung (killed after 120 s)"
  grep -q "missing.npy" "$work/bad.err" || fail "the error does not name the missing file: $(cat "$work/bad.err")"
  [ "$(grep -v "stopped: mpirun ended the job because another rank stopped first" "$work/bad.err" | grep -c .)" = 1 ] ||
    fail "expected one error line: $(cat "$work/bad.err")"
fi

# A rank with another plugin set (here one more plugin) is refused before anything runs.
good=$(dirname "$qflow")/../tests/plugin/lib/libqflow_test_good.so
if [ -f "$good" ]; then
  args=(run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx
        --set data=models/fashion_mnist/calib_200.npy --threads 1 --out "$work/mixed")
  if timeout 120 "${mpi[@]}" 1 "$qflow" "${args[@]}" : -np 1 "$qflow" --plugin "$good" "${args[@]}" \
       >"$work/mixed.log" 2>&1; then
    fail "ranks with different plugin sets ran"
  else
    grep -q "rank 1 runs a different qflow build or plugin set than rank 0: .*plugin test-good" "$work/mixed.log" ||
      fail "the refusal does not name the rank and the plugin: $(cat "$work/mixed.log")"
    [ ! -e "$work/mixed" ] || fail "a refused run left $work/mixed behind"
  fi
else
  fail "no $good to give one rank another plugin set"
fi

[ "$failed" = 0 ] && echo "PASS: $artifacts artifacts of ptq.toml and bpu_ptq.toml (plain and searching) and compare_stages.toml, and a load-data scan with NaN rows, identical for 1, 2 and 4 ranks"
exit "$failed"
