#!/bin/bash
# `mpirun -np 2` and `-np 4` of pipelines/ptq.toml on the Fashion-MNIST fixture must write the
# calibration table and QDQ models byte-identical to one process (docs/distributed.md), a
# manifest naming the rank count, and a failing run must end every rank instead of hanging.
# Skips (exit 77) with the reason when qflow was built without QFLOW_MPI or mpirun is missing.
#
# usage: check_mpi_ptq.sh QFLOW SOURCE_DIR WORK_DIR QFLOW_MPI(ON|OFF)
set -u
qflow=$1 source_dir=$2 work=$3 with_mpi=$4
case "$with_mpi" in
  ON | on | 1 | TRUE | true) ;;
  *) echo "SKIP: qflow was built without QFLOW_MPI (install libboost-mpi-dev openmpi-bin and reconfigure)"; exit 77 ;;
esac
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# As root (containers, CI) Open MPI wants to be told; --oversubscribe allows more ranks than cores.
mpi=(mpirun --oversubscribe -np)
[ "$(id -u)" = 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np)
# Shared-memory transport only; the ranks of this test share one machine.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

args=(run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx
      --set data=models/fashion_mnist/calib_200.npy --threads 1 --save-intermediate)
sums() { (cd "$1" && sha256sum $(ls | grep -v -e '^manifest.json$' | sort)); }

start=$(date +%s.%N)
if ! "$qflow" "${args[@]}" --out "$work/one" >"$work/one.log" 2>&1; then
  fail "the single-process run failed: $(cat "$work/one.log")"
  exit 1
fi
echo "one process: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
sums "$work/one" >"$work/one.sums"
grep -q calibration_table.json "$work/one.sums" && grep -q _ptq_model.onnx "$work/one.sums" &&
  grep -q _calibrated_model.onnx "$work/one.sums" || fail "the single-process run wrote no table or QDQ models"

for ranks in 2 4; do
  out=$work/np$ranks
  start=$(date +%s.%N)
  if ! timeout 600 "${mpi[@]}" "$ranks" "$qflow" "${args[@]}" --out "$out" >"$out.log" 2>&1; then
    fail "mpirun -np $ranks failed: $(cat "$out.log")"
    continue
  fi
  echo "mpirun -np $ranks: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
  sums "$out" >"$out.sums"
  diff -u "$work/one.sums" "$out.sums" || fail "mpirun -np $ranks: artifacts differ from one process"
  grep -q "\"ranks\": $ranks," "$out/manifest.json" || fail "mpirun -np $ranks: manifest.json does not record $ranks ranks"
  # Rank 0 alone prints the run's lines: one "wrote" line for the manifest, not one per rank.
  [ "$(grep -c 'wrote .*manifest.json' "$out.log")" = 1 ] || fail "mpirun -np $ranks: expected one manifest line: $(cat "$out.log")"
done

# One bad input fails the run on every rank; the job must end (non-zero), not hang.
if timeout 120 "${mpi[@]}" 2 "$qflow" run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx \
     --set data="$work/missing.npy" --threads 1 --out "$work/bad" >"$work/bad.log" 2>&1; then
  fail "mpirun with a missing data file succeeded"
else
  code=$?
  [ "$code" = 124 ] && fail "mpirun with a missing data file hung (killed after 120 s)"
  grep -q "missing.npy" "$work/bad.log" || fail "the error does not name the missing file: $(cat "$work/bad.log")"
fi

[ "$failed" = 0 ] && echo "PASS: $(wc -l <"$work/one.sums") artifacts identical for 1, 2 and 4 ranks"
exit "$failed"
