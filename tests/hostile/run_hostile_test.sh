#!/bin/bash
# One hostile-input test: tests/cli/run_cli_test.sh checks the exit code and the exact
# one-line message against golden/NAME.stderr, then check_outputs.py checks that the test's
# output folder (@WORK@) holds no half-written artifact.
#
# usage: run_hostile_test.sh QFLOW SOURCE_DIR WORK_ROOT NAME EXIT [--failed STAGE]
#                            [--stages ID,...] [run_cli_test.sh options] -- ARGS...
# ARGS run in tests/hostile/data; "@WORK@" names the test's fresh output folder.
set -u
qflow=$1 src=$2 work_root=$3 name=$4 expected_exit=$5
shift 5
check=()
while [ $# -gt 0 ]; do
  case $1 in
    --failed|--stages) check+=("$1" "$2"); shift 2 ;;
    *) break ;;
  esac
done
here=$src/tests/hostile
"$src/tests/cli/run_cli_test.sh" "$qflow" "$here/golden" "$here/data" "$work_root" "$name" "$expected_exit" "$@"
status=$?
/usr/bin/python3 "$here/check_outputs.py" "$qflow" "$work_root/$name" "${check[@]}" || status=1
exit "$status"
