#!/bin/bash
# Plugin locations: a pipeline's relative `plugins` entry is resolved against the pipeline
# file's folder, never against the current directory (which holds a decoy of the same name
# that cannot load); the manifest records the absolute path; `qflow plugins` shows the
# library's absolute path and the SHA-256 of its file.
#
# usage: check_plugin_paths.sh QFLOW PLUGIN DATA_DIR WORK
set -u
qflow=$1 plugin=$2 data=$3 work=$4
fail() { echo "FAIL plugin_paths: $*"; exit 1; }

rm -rf "$work" && mkdir -p "$work/pipeline" "$work/cwd" || exit 1
cp "$plugin" "$work/pipeline/libqflow_test_limits.so" || exit 1
echo "decoy: the current directory is never searched" >"$work/cwd/libqflow_test_limits.so"
cat >"$work/pipeline/noop.toml" <<TOML
plugins = ["libqflow_test_limits.so"]

[[stage]]
id = "import"
use = "import-onnx"
options = { path = "$data/tiny.onnx", name = "tiny" }

[[stage]]
id = "noop"
use = "noop-hostile"
inputs = { model = "import.model" }
TOML

cd "$work/cwd" || exit 1
"$qflow" --no-default-plugins run ../pipeline/noop.toml --out "$work/out" --threads 1 >"$work/run.stdout" 2>"$work/run.stderr" ||
  fail "the pipeline's relative plugin entry did not load from the pipeline's folder: $(cat "$work/run.stderr")"
grep -q "\"$work/pipeline/libqflow_test_limits.so\"" "$work/out/manifest.json" ||
  fail "the manifest does not record the plugin's absolute path"

# The same entry in a pipeline placed elsewhere names a file that is not there: refused,
# even though the current directory has a file of that name.
mkdir -p "$work/elsewhere" && cp "$work/pipeline/noop.toml" "$work/elsewhere/noop.toml"
if "$qflow" --no-default-plugins run ../elsewhere/noop.toml --out "$work/out2" >/dev/null 2>"$work/elsewhere.stderr"; then
  fail "a plugin entry resolved against the current directory"
fi
expected="qflow: error: ../elsewhere/noop.toml: plugins: plugin '$work/elsewhere/libqflow_test_limits.so': no such file"
[ "$(cat "$work/elsewhere.stderr")" = "$expected" ] || fail "message: $(cat "$work/elsewhere.stderr"), expected: $expected"

# `qflow plugins`: absolute path and content hash of the loaded file.
"$qflow" plugins --json --no-default-plugins --plugin "$work/pipeline/libqflow_test_limits.so" >"$work/plugins.json" ||
  fail "qflow plugins refused the plugin"
sum=$(sha256sum "$work/pipeline/libqflow_test_limits.so" | cut -d' ' -f1)
grep -q "\"$work/pipeline/libqflow_test_limits.so\"" "$work/plugins.json" || fail "qflow plugins does not show the absolute path"
grep -q "\"$sum\"" "$work/plugins.json" || fail "qflow plugins does not show the file's SHA-256 $sum"
echo "PASS plugin_paths"
