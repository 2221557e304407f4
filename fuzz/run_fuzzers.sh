#!/usr/bin/env bash
# Runs libFuzzer targets built by `make fuzz`, each for a fixed time from its committed seeds,
# and prints the executions and findings per target:
#   fuzz/run_fuzzers.sh <build folder> <seconds per target> <target>...
# The committed corpus is only read: new coverage goes to <build>/fuzz/corpus/<target>,
# crash/timeout/oom inputs to <build>/fuzz/findings/<target>, the log to <build>/fuzz/<target>.log.
# Exit status 1 when any target found something.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 <build folder> <seconds per target> <target>..." >&2
  exit 2
fi
build=$1 seconds=$2
shift 2
source_dir=$(cd "$(dirname "$0")" && pwd)
work="$build/fuzz"
found_any=0
summary=()
for target in "$@"; do
  fuzzer="$build/bin/qflow_fuzz_$target"
  if [ ! -x "$fuzzer" ]; then
    echo "run_fuzzers: $fuzzer is missing (build it with make fuzz)" >&2
    exit 2
  fi
  corpus="$work/corpus/$target" findings="$work/findings/$target" log="$work/$target.log"
  mkdir -p "$corpus" "$findings"
  echo "== $target: ${seconds}s"
  # -timeout: one input may take 10 s; -rss_limit_mb: hostile sizes must be refused long
  # before 2 GiB. Findings do not stop the run (-fork keeps going after a crash).
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$findings/" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    "$corpus" "$source_dir/corpus/$target" >"$log" 2>&1
  # With -fork each job prints its own stats; the last "#N ... DONE"/status line holds the total.
  execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  crashes=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' \) | wc -l)
  timeouts=$(find "$findings" -type f -name 'timeout-*' | wc -l)
  ooms=$(find "$findings" -type f -name 'oom-*' | wc -l)
  [ $((crashes + timeouts + ooms)) -gt 0 ] && found_any=1
  summary+=("$(printf '%-18s %12s %8s %8s %8s' "$target" "${execs:-0}" "$crashes" "$timeouts" "$ooms")")
done
echo
printf '%-18s %12s %8s %8s %8s\n' target executions crashes timeouts ooms
printf '%s\n' "${summary[@]}"
echo "findings (if any) are under $work/findings/<target>/; logs in $work/<target>.log"
exit $found_any
