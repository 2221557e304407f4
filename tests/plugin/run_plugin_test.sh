#!/bin/bash
# Runs one qflow command against the test plugins and compares exit code, stderr (and
# optionally stdout) with golden files. The plugin folder is written as "@PLUGINS@" and
# each test library's SHA-256 as "@SHA256@", so goldens do not depend on the build tree;
# a wrong hash stays visible. QFLOW_UPDATE_GOLDEN=1 rewrites the goldens.
#
# usage: run_plugin_test.sh QFLOW GOLDEN_DIR PLUGIN_DIR NAME EXIT [--stdout] [--env NAME=VALUE]...
#                           -- ARGS...
# The command runs in PLUGIN_DIR; "@PLUGINS@" in ARGS and env values names that folder.
set -u

qflow=$1 golden_dir=$2 plugin_dir=$3 name=$4 expected_exit=$5
shift 5
check_stdout=0
envs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --stdout) check_stdout=1 ;;
    --env) shift; envs+=("${1//@PLUGINS@/$plugin_dir}") ;;
    *) echo "run_plugin_test.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift

args=()
for a in "$@"; do args+=("${a//@PLUGINS@/$plugin_dir}"); done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$plugin_dir" || exit 1
env ${envs[@]+"${envs[@]}"} "$qflow" "${args[@]}" >"$out/stdout" 2>"$out/stderr"
exit_code=$?

for lib in "$plugin_dir"/*.so; do
  hash=$(sha256sum "$lib" | cut -d' ' -f1)
  sed -i "s|$hash|@SHA256@|g" "$out/stdout" "$out/stderr"
done
sed -i "s|$plugin_dir|@PLUGINS@|g" "$out/stdout" "$out/stderr"

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
      echo "FAIL $name: $(basename "$produced") differs from $golden"
      failed=1
    fi
  elif [ -s "$produced" ]; then
    echo "FAIL $name: unexpected output:"
    cat "$produced"
    failed=1
  fi
}

compare_golden "$out/stderr" "$golden_dir/$name.stderr"
[ "$check_stdout" = 1 ] && compare_golden "$out/stdout" "$golden_dir/$name.stdout"

# Every failure is exactly one line on stderr.
if [ "$exit_code" != 0 ]; then
  if [ "$(wc -l <"$out/stderr")" != 1 ] || ! grep -q '^qflow: error: ' "$out/stderr"; then
    echo "FAIL $name: a failure must print one 'qflow: error:' line, got:"
    cat "$out/stderr"
    failed=1
  fi
fi

[ "$failed" = 0 ] && echo "PASS $name"
exit "$failed"
