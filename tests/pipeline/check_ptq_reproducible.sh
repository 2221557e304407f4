#!/bin/bash
# Runs pipelines/ptq.toml (the Fashion-MNIST fixture, kl) with 1 and 2 threads, batch sizes 1
# and 16, and on a shuffled copy of the calibration samples: the calibration table and every
# model artifact must be byte-identical across all runs (the dataset description, which
# names the data file, is the only artifact allowed to differ).
#
# usage: check_ptq_reproducible.sh QFLOW SOURCE_DIR WORK_DIR
set -u
qflow=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

data=models/fashion_mnist/calib_200.npy
shuffled=$work/calib_shuffled.npy
# A fixed permutation of the samples (rows), written by plain python3 without numpy.
python3 - "$data" "$shuffled" <<'PY' || exit 1
import ast, random, sys
raw = open(sys.argv[1], "rb").read()
header_len = int.from_bytes(raw[8:10], "little")
header = ast.literal_eval(raw[10:10 + header_len].decode("latin1"))
start = 10 + header_len
shape = header["shape"]
row = len(raw[start:]) // shape[0]
rows = [raw[start + i * row:start + (i + 1) * row] for i in range(shape[0])]
random.Random(7).shuffle(rows)
open(sys.argv[2], "wb").write(raw[:start] + b"".join(rows))
PY

run() {
  local name=$1
  shift
  if ! "$qflow" run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set method=kl --out "$work/$name" "$@" >"$work/$name.log" 2>&1; then
    fail "run $name ($*) failed: $(cat "$work/$name.log")"
    return
  fi
  (cd "$work/$name" && sha256sum $(ls | grep -v -e '^manifest.json$' -e '\.dataset\.json$' | sort)) >"$work/$name.sums"
}

run threads1 --threads 1
run threads2 --threads 2
run batch16 --threads 2 --set data.batch-size=16
run shuffled --threads 2 --set "data=$shuffled"

[ -s "$work/threads1.sums" ] && grep -q calibration_table.json "$work/threads1.sums" ||
  fail "the reference run wrote no calibration table"
for name in threads2 batch16 shuffled; do
  [ -f "$work/$name.sums" ] || continue
  if ! diff -u "$work/threads1.sums" "$work/$name.sums"; then fail "$name: artifacts differ from threads1"; fi
done
[ "$failed" = 0 ] && echo "PASS: $(wc -l <"$work/threads1.sums") artifacts identical across threads 1/2, batch 1/16, shuffled samples"
exit "$failed"
