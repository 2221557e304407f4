#!/bin/bash
# Runs one qflow command and compares its exit code, stderr (and optionally stdout and
# produced files) with committed golden files. QFLOW_UPDATE_GOLDEN=1 rewrites the goldens.
#
# usage: run_cli_test.sh QFLOW GOLDEN_DIR DATA_DIR WORK_ROOT NAME EXIT [--stdout]
#                        [--compare PRODUCED=EXPECTED]... -- ARGS...
# The command runs in DATA_DIR so paths in messages are short and stable. "@WORK@" in
# ARGS and PRODUCED names a fresh folder for the test; in outputs it is written back as
# "@WORK@" before comparing.
set -u

qflow=$1 golden_dir=$2 data_dir=$3 work_root=$4 name=$5 expected_exit=$6
shift 6
check_stdout=0
compares=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --stdout) check_stdout=1 ;;
    --compare) shift; compares+=("$1") ;;
    *) echo "run_cli_test.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift

work=$work_root/$name
rm -rf "$work" && mkdir -p "$work"
args=()
for a in "$@"; do args+=("${a//@WORK@/$work}"); done

cd "$data_dir" || exit 1
"$qflow" "${args[@]}" >"$work.stdout" 2>"$work.stderr"
exit_code=$?
sed -i "s|$work|@WORK@|g" "$work.stdout" "$work.stderr"

failed=0
if [ "$exit_code" != "$expected_exit" ]; then
  echo "FAIL $name: exit code $exit_code, expected $expected_exit"
  failed=1
fi

compare_golden() {  # produced golden-file
  local produced=$1 golden=$2
  if [ "${QFLOW_UPDATE_GOLDEN:-0}" = 1 ]; then
    if [ -s "$produced" ] || [ -e "$golden" ]; then cp "$produced" "$golden"; fi
    return
  fi
  if [ -e "$golden" ]; then
    if ! diff -u "$golden" "$produced"; then
      echo "FAIL $name: $(basename "$produced" | sed 's/.*\.//') differs from $golden"
      failed=1
    fi
  elif [ -s "$produced" ]; then
    echo "FAIL $name: unexpected output:"
    cat "$produced"
    failed=1
  fi
}

compare_golden "$work.stderr" "$golden_dir/$name.stderr"
if [ "$check_stdout" = 1 ]; then
  compare_golden "$work.stdout" "$golden_dir/$name.stdout"
fi

# Every failure is exactly one line on stderr.
if [ "$exit_code" != 0 ]; then
  lines=$(wc -l <"$work.stderr")
  if [ "$lines" != 1 ] || ! grep -q '^qflow: error: ' "$work.stderr"; then
    echo "FAIL $name: a failure must print one 'qflow: error:' line, got:"
    cat "$work.stderr"
    failed=1
  fi
fi

for pair in "${compares[@]}"; do
  produced=${pair%%=*}
  expected=${pair#*=}
  produced=${produced//@WORK@/$work}
  if ! cmp "$produced" "$expected"; then
    echo "FAIL $name: $produced differs from $expected"
    failed=1
  fi
done

[ "$failed" = 0 ] && echo "PASS $name"
exit "$failed"
