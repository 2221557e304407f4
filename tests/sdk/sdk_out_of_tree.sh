#!/bin/bash
# Installs qflow, builds sdk/examples/shrink_max_calibrator, sdk/examples/aciq_calibrator,
# sdk/examples/int8_units_target and sdk/examples/name_nodes_pass against the install, loads and
# runs them; a plugin with an undefined symbol fails to link with qflow_add_plugin, and fails to
# load with a message naming the symbol when built without it.
# usage: sdk_out_of_tree.sh BUILD_DIR SOURCE_DIR [CXX_COMPILER]
set -euo pipefail

build_dir=$(cd "${1:?usage: sdk_out_of_tree.sh BUILD_DIR SOURCE_DIR [CXX_COMPILER]}" && pwd)
source_dir=$(cd "${2:?usage: sdk_out_of_tree.sh BUILD_DIR SOURCE_DIR [CXX_COMPILER]}" && pwd)
cxx=${3:-}
example=$source_dir/sdk/examples/shrink_max_calibrator

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qflow-sdk-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "sdk_out_of_tree: FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

# Install to one folder and use it from another: the installed tree must not depend on
# where it was installed, nor on the build tree.
step "cmake --install $build_dir"
cmake --install "$build_dir" --prefix "$tmp/staged" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "install failed"; }
mv "$tmp/staged" "$tmp/prefix"
prefix=$tmp/prefix
# The whole project's install carries the runtime too: its library, its C API, the Status
# the SDK headers include (qflow/core/status.h, from runtime/include) and its pkg-config file.
for f in bin/qflow lib/libqflow_core.so include/qflow/version.h include/qflow/plugin/entry.h include/qflow/ir/rewrite.h \
         lib/libqflow_runtime.so include/qflow/runtime.h include/qflow/core/status.h \
         include/qflow/runtime/executor.h lib/pkgconfig/qflow-runtime.pc \
         lib/cmake/qflow/qflowConfig.cmake lib/cmake/qflow/qflowConfigVersion.cmake lib/cmake/qflow/qflowTargets.cmake; do
  [ -e "$prefix/$f" ] || fail "install is missing $f"
done
[ ! -e "$prefix/include/qflow/version.h.in" ] || fail "install carries the version.h template"
ls "$prefix"/lib/qflow/plugins/*.so >/dev/null 2>&1 || fail "install has no built-in plugins in lib/qflow/plugins"
if grep -rl -e "$build_dir" -e "$source_dir" "$prefix/lib/cmake/qflow" >/dev/null; then
  fail "the installed CMake package names the build or source tree: $(grep -rl -e "$build_dir" -e "$source_dir" "$prefix/lib/cmake/qflow")"
fi
if command -v readelf >/dev/null; then
  for f in "$prefix/bin/qflow" "$prefix/lib/libqflow_core.so" "$prefix"/lib/qflow/plugins/*.so; do
    paths=$(grep -E 'RPATH|RUNPATH' <<< "$(readelf -d "$f")" || true)
    if grep -q -e "$build_dir" <<< "$paths"; then
      fail "$f keeps a search path into the build tree: $paths"
    fi
  done
fi
qflow=$prefix/bin/qflow
"$qflow" --version >/dev/null || fail "the installed qflow does not start"
# The built-in plugins are linked as qflow_add_plugin links out-of-tree ones: the entry point
# is their only dynamic symbol.
if command -v nm >/dev/null; then
  for f in "$prefix"/lib/qflow/plugins/*.so; do
    exported=$(nm -D --defined-only "$f" | awk '{print $NF}')
    [ "$exported" = "qflow_plugin_entry" ] || fail "$f should export only qflow_plugin_entry, it exports: $(echo $exported | head -c 600)"
  done
fi

# Builds the example in folder $1 into $tmp/$2 against the install: no CMake warning, and the
# library $3 exports nothing but the plugin entry point (no weak libstdc++ template either).
build_example() {
  local source=$1 build=$tmp/$2 library=$tmp/$2/$3
  local args=(-S "$source" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix")
  [ -n "$cxx" ] && args+=(-DCMAKE_CXX_COMPILER="$cxx")
  command -v ccache >/dev/null && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake "${args[@]}" >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; fail "configuring $source failed"; }
  if grep -q "CMake Warning" "$build.configure.log"; then
    cat "$build.configure.log" >&2
    fail "configuring $source against qflow warned"
  fi
  cmake --build "$build" -j2 >"$build.build.log" 2>&1 || { cat "$build.build.log" >&2; fail "building $source failed"; }
  [ -f "$library" ] || fail "$source did not produce $library"
  if command -v nm >/dev/null; then
    local exported
    exported=$(nm -D --defined-only "$library" | awk '{print $NF}')
    [ "$exported" = "qflow_plugin_entry" ] || fail "$library should export only qflow_plugin_entry, it exports: $exported"
  fi
}

step "build the example plugin out of tree"
build_example "$example" example-build libqflow_example_calibrator.so
plugin=$tmp/example-build/libqflow_example_calibrator.so

step "qflow plugins --plugin $plugin"
"$qflow" plugins --plugin "$plugin" >"$tmp/plugins.txt" 2>&1 || { cat "$tmp/plugins.txt" >&2; fail "qflow plugins refused the example"; }
grep -q "qflow-example-calibrator" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt" >&2; fail "the plugin library is not listed"; }
grep -q "shrink-max" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt" >&2; fail "the shrink-max calibrator is not listed"; }
grep -q "ratio" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt" >&2; fail "the ratio option is not listed"; }
# Built-in plugins come from the install prefix, not from the build tree.
grep -q "minmax" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt" >&2; fail "the installed built-in minmax observer is not listed"; }

step "QFLOW_PLUGIN_PATH=$tmp/example-build qflow plugins"
QFLOW_PLUGIN_PATH=$tmp/example-build "$qflow" plugins >"$tmp/plugins-env.txt" 2>&1 || { cat "$tmp/plugins-env.txt" >&2; fail "qflow plugins with QFLOW_PLUGIN_PATH failed"; }
grep -q "calibrator shrink-max" "$tmp/plugins-env.txt" || { cat "$tmp/plugins-env.txt" >&2; fail "QFLOW_PLUGIN_PATH did not load the example"; }

# The pipeline names the plugin relative to its own folder; model and data are absolute.
step "qflow run with the example calibrator"
mkdir -p "$tmp/run"
# The sample model observed on its calibration samples: the start of both example pipelines.
observed_sample=$(cat <<TOML
[vars]
model = "$source_dir/models/sample/sample_cnn.onnx"
data = "$source_dir/models/sample/input.npy"

[[stage]]
id = "import"
use = "import-onnx"
options = { path = "\${model}" }

[[stage]]
id = "data"
use = "load-data"
options = { path = "\${data}" }

[[stage]]
id = "observe"
use = "minmax"
inputs = { model = "import.model", dataset = "data.dataset" }
# Named, so the run writes it (statistics otherwise stay in memory).
output = "observe.statistics.json"
TOML
)
cat >"$tmp/run/shrink-max.toml" <<TOML
plugins = ["../example-build/libqflow_example_calibrator.so"]

$observed_sample

[[stage]]
id = "calibrate"
use = "shrink-max"
inputs = { statistics = "observe.statistics" }
options = { ratio = 0.5 }
TOML
(cd "$tmp/run" && "$qflow" run shrink-max.toml --out out) >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; fail "qflow run failed"; }
table=$tmp/run/out/calibration_table.json
[ -f "$table" ] || { ls -R "$tmp/run/out" >&2; fail "the run wrote no calibration_table.json"; }
grep -q '"method": *"shrink-max"' "$table" || { head -c 2000 "$table" >&2; fail "calibration_table.json does not name the shrink-max method"; }
grep -q '"method": *"max"' "$table" && fail "calibration_table.json names the built-in max calibrator"
# Every threshold is ratio * max(|min|, |max|) of the observed range.
if command -v python3 >/dev/null; then
  python3 - "$tmp/run/out/observe.statistics.json" "$table" <<'PY' || fail "thresholds are not 0.5 * max|x|"
import json, sys
stats = json.load(open(sys.argv[1]))["tensors"]
table = json.load(open(sys.argv[2]))["tensors"]
assert table, "empty calibration table"
for name, q in table.items():
    s = stats[name]
    expected = 0.5 * max(abs(s["min"]), abs(s["max"]))
    assert abs(q["threshold"] - expected) <= 1e-9 * max(1.0, expected), (name, q["threshold"], expected)
    assert q["zero_point"] == [0], (name, q["zero_point"])
    assert expected == 0 or abs(q["scale"][0] - expected / 127) <= 1e-6 * expected, (name, q["scale"], expected)
PY
else
  echo "SKIP (part): python3 is not installed, the per-tensor thresholds were not recomputed"
fi

# The ratio's declared limits and name are checked by --dry-run, before any stage runs.
step "qflow run --dry-run --set calibrate.ratio=1.5 is refused"
if (cd "$tmp/run" && "$qflow" run shrink-max.toml --dry-run --set calibrate.ratio=1.5) >"$tmp/run-bad.log" 2>&1; then
  fail "a ratio outside (0, 1] was accepted"
fi
grep -qF "qflow: error: --set calibrate.ratio=1.5: option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 1.5" "$tmp/run-bad.log" ||
  { cat "$tmp/run-bad.log" >&2; fail "the refusal does not name the ratio and its limits"; }
step "qflow run --dry-run with a misspelt option suggests the declared one"
sed 's/^options = { ratio = 0.5 }$/options = { ration = 0.5 }/' "$tmp/run/shrink-max.toml" >"$tmp/run/shrink-max-typo.toml"
if (cd "$tmp/run" && "$qflow" run shrink-max-typo.toml --dry-run) >"$tmp/run-typo.log" 2>&1; then
  fail "a misspelt option was accepted"
fi
grep -qF "stage 'calibrate': option 'ration' is not declared by calibrator 'shrink-max'; did you mean 'ratio'?" "$tmp/run-typo.log" ||
  { cat "$tmp/run-typo.log" >&2; fail "the misspelt option is not answered with 'ratio'"; }

step "build the example observer/calibrator pair out of tree: a statistic of their own"
build_example "$source_dir/sdk/examples/aciq_calibrator" aciq-build libqflow_example_aciq.so
cat >"$tmp/run/aciq.toml" <<TOML
plugins = ["../aciq-build/libqflow_example_aciq.so"]

$(echo "$observed_sample" | sed 's/^use = "minmax"$/use = "abs-mean"/')

[[stage]]
id = "calibrate"
use = "aciq"
inputs = { statistics = "observe.statistics" }
TOML
(cd "$tmp/run" && "$qflow" run aciq.toml --out aciq-out) >"$tmp/aciq.log" 2>&1 || { cat "$tmp/aciq.log" >&2; fail "the aciq pipeline failed"; }
if command -v python3 >/dev/null; then
  python3 - "$tmp/run/aciq-out/observe.statistics.json" "$tmp/run/aciq-out/calibration_table.json" <<'PY' || fail "aciq thresholds are not min(9.89 * mean|x|, max|x|)"
import json, sys
stats = json.load(open(sys.argv[1]))["tensors"]
table = json.load(open(sys.argv[2]))["tensors"]
assert table, "empty calibration table"
clipped = 0
for name, q in table.items():
    s = stats[name]
    abs_sum, count = s["named"]["aciq.abs-mean"]
    assert count == s["count"], (name, count, s["count"])
    magnitude = max(abs(s["min"]), abs(s["max"]))
    expected = min(9.89 * abs_sum / count, magnitude)
    clipped += expected < magnitude
    assert abs(q["threshold"] - expected) <= 1e-9 * max(1.0, expected), (name, q["threshold"], expected)
    assert q["method"] == "aciq", (name, q["method"])
assert clipped > 0, "no tensor was clipped below its range"
PY
fi
# The built-in minmax observer does not publish the statistic: refused before anything runs.
sed 's/^use = "abs-mean"$/use = "minmax"/' "$tmp/run/aciq.toml" >"$tmp/run/aciq-minmax.toml"
if (cd "$tmp/run" && "$qflow" run aciq-minmax.toml --dry-run) >"$tmp/aciq-minmax.log" 2>&1; then
  fail "a calibrator requiring a statistic its observer does not publish passed validation"
fi
grep -q "calibrator 'aciq' requires the statistic 'aciq.abs-mean', which observer 'minmax' (stage 'observe') does not publish (it publishes range; published by observer:abs-mean)" "$tmp/aciq-minmax.log" ||
  { cat "$tmp/aciq-minmax.log" >&2; fail "the missing statistic is not named"; }

step "build the example target out of tree and run its stages"
build_example "$source_dir/sdk/examples/int8_units_target" target-build libqflow_example_target.so
cat >"$tmp/run/int8-units.toml" <<TOML
plugins = ["../target-build/libqflow_example_target.so"]

$observed_sample

[[stage]]
id = "calibrate"
use = "max"
inputs = { statistics = "observe.statistics" }

[[stage]]
id = "ptq"
use = "quantize"
inputs = { model = "import.model", qparams = "calibrate.qparams" }

[[stage]]
id = "check"
use = "target-check:int8-units"
inputs = { model = "ptq.model" }
options = { int8-ops = ["Conv", "Gemm"] }

[[stage]]
id = "lower"
use = "target-lower:int8-units"
inputs = { model = "ptq.model" }
options = { name = "sample", int8-ops = ["Conv", "Gemm"] }
TOML
(cd "$tmp/run" && "$qflow" run int8-units.toml --out target-out) >"$tmp/target-run.log" 2>&1 || { cat "$tmp/target-run.log" >&2; fail "the example target's pipeline failed"; }
for f in model_check_result.json model_check_result.txt sample_int8_units.json; do
  [ -f "$tmp/run/target-out/$f" ] || { ls "$tmp/run/target-out" >&2; fail "the example target's pipeline wrote no $f"; }
done
if command -v python3 >/dev/null; then
  python3 - "$tmp/run/target-out" <<'PY' || fail "the example target's check and lowering disagree"
import json, os, sys
out = sys.argv[1]
check = json.load(open(os.path.join(out, "model_check_result.json")))
units = json.load(open(os.path.join(out, "sample_int8_units.json")))
int8 = [n["name"] for n in check["nodes"] if n["placement"] == "int8"]
assert int8 and int8 == units, (int8, units)
assert all(n["op_type"] in ("Conv", "Gemm") for n in check["nodes"] if n["placement"] == "int8"), check["nodes"]
floats = [n for n in check["nodes"] if n["placement"] == "float"]
assert floats and all(n["reason"] for n in floats), floats
assert check["summary"]["int8_nodes"] == len(int8)
stages = json.load(open(os.path.join(out, "manifest.json")))["stages"]
lower = [s for s in stages if s["id"] == "lower"]
assert lower and lower[0]["side_file_roles"] == {"sample_int8_units.json": "units"}, lower
PY
fi
grep -q "target-check:int8-units" "$tmp/target-run.log" || { cat "$tmp/target-run.log" >&2; fail "the run log does not name the example target"; }

step "build the example pass out of tree and run it in a passes stage"
build_example "$source_dir/sdk/examples/name_nodes_pass" pass-build libqflow_example_pass.so
# The sample model with its node names removed (protobuf text format round trip).
proto_dir=/usr/include
if command -v protoc >/dev/null && [ -f "$proto_dir/onnx/onnx.proto" ]; then
  onnx_text() { protoc -I"$proto_dir" --decode=onnx.ModelProto onnx/onnx.proto <"$1"; }
  onnx_text "$source_dir/models/sample/sample_cnn.onnx" |
    awk '/^  node \{$/ {in_node = 1} /^  \}$/ {in_node = 0} !(in_node && /^    name: /)' |
    protoc -I"$proto_dir" --encode=onnx.ModelProto onnx/onnx.proto >"$tmp/run/unnamed.onnx"
  nodes=$(onnx_text "$source_dir/models/sample/sample_cnn.onnx" | grep -c '^  node {')
  [ "$(onnx_text "$tmp/run/unnamed.onnx" | awk '/^  node \{$/ {n = 1} /^  \}$/ {n = 0} n && /^    name: /' | wc -l)" = 0 ] ||
    fail "the unnamed sample model still names nodes"
  cat >"$tmp/run/name-nodes.toml" <<TOML
plugins = ["../pass-build/libqflow_example_pass.so"]

[[stage]]
id = "import"
use = "import-onnx"
options = { path = "unnamed.onnx" }

[[stage]]
id = "optimize"
use = "passes"
inputs = { model = "import.model" }
options = { passes = "name-nodes<prefix=n_>" }
output = "named.onnx"
TOML
  (cd "$tmp/run" && "$qflow" run name-nodes.toml --out pass-out) >"$tmp/pass-run.log" 2>&1 || { cat "$tmp/pass-run.log" >&2; fail "the example pass's pipeline failed"; }
  grep -q "^  name-nodes: .*nodes-named=$nodes " "$tmp/pass-run.log" || { cat "$tmp/pass-run.log" >&2; fail "the pass statistics do not count $nodes named nodes"; }
  names=$(onnx_text "$tmp/run/pass-out/named.onnx" | awk '/^  node \{$/ {n = 1} /^  \}$/ {n = 0} n && /^    name: / {print $2}')
  [ "$(echo "$names" | grep -c .)" = "$nodes" ] || { echo "$names" >&2; fail "not every node of named.onnx is named"; }
  [ "$(echo "$names" | sort -u | wc -l)" = "$nodes" ] || { echo "$names" >&2; fail "named.onnx repeats a node name"; }
  grep -qx '"n_Conv_0"' <<< "$names" || { echo "$names" >&2; fail "the first Conv is not named n_Conv_0"; }
  # Stable: the same model gets the same names again.
  (cd "$tmp/run" && "$qflow" run name-nodes.toml --out pass-out-2) >/dev/null 2>&1 || fail "the second run of the example pass failed"
  cmp -s "$tmp/run/pass-out/named.onnx" "$tmp/run/pass-out-2/named.onnx" || fail "the example pass named the same model differently"
else
  echo "SKIP (part): protoc or onnx.proto is missing, the example pass was built but not run"
fi

step "a plugin with an undefined symbol fails to link with qflow_add_plugin"
mkdir -p "$tmp/undefined-src"
cat >"$tmp/undefined-src/research.cpp" <<'CPP'
#include <memory>

#include "qflow/plugin/entry.h"

// Defined in a research library the author forgot to link.
double research_helper_laplace_b(const double* values, unsigned long count);

namespace {
qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  const double probe[1] = {0.0};
  if (research_helper_laplace_b(probe, 1) < 0) return qflow::invalid_input("negative scale");
  (void)registrar;
  return qflow::Status::ok();
}
}  // namespace

QFLOW_PLUGIN("research", "1.0.0", register_components)
CPP
cat >"$tmp/undefined-src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(research LANGUAGES CXX)
find_package(qflow REQUIRED)
option(PLAIN_MODULE "build with add_library instead of qflow_add_plugin" OFF)
if(PLAIN_MODULE)
  add_library(research MODULE research.cpp)
  target_link_libraries(research PRIVATE qflow::sdk)
else()
  qflow_add_plugin(research research.cpp)
endif()
CMAKE
undefined_args=(-S "$tmp/undefined-src" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix")
[ -n "$cxx" ] && undefined_args+=(-DCMAKE_CXX_COMPILER="$cxx")
cmake "${undefined_args[@]}" -B "$tmp/undefined-build" >"$tmp/undefined.configure.log" 2>&1 ||
  { cat "$tmp/undefined.configure.log" >&2; fail "configuring the undefined-symbol plugin failed"; }
if cmake --build "$tmp/undefined-build" >"$tmp/undefined.build.log" 2>&1; then
  fail "a plugin with an undefined symbol linked with qflow_add_plugin"
fi
grep -q "undefined reference to .research_helper_laplace_b(double const\*, unsigned long)" "$tmp/undefined.build.log" ||
  { cat "$tmp/undefined.build.log" >&2; fail "the link failure does not name research_helper_laplace_b"; }

step "the same plugin built without qflow_add_plugin is refused at load, naming the symbol"
cmake "${undefined_args[@]}" -B "$tmp/plain-build" -DPLAIN_MODULE=ON >"$tmp/plain.configure.log" 2>&1 ||
  { cat "$tmp/plain.configure.log" >&2; fail "configuring the plain undefined-symbol plugin failed"; }
cmake --build "$tmp/plain-build" >"$tmp/plain.build.log" 2>&1 || { cat "$tmp/plain.build.log" >&2; fail "building the plain module failed"; }
if "$qflow" plugins --plugin "$tmp/plain-build/libresearch.so" >"$tmp/plain-load.log" 2>&1; then
  fail "a plugin with an undefined symbol was loaded"
fi
grep -qF "cannot load: undefined symbol: research_helper_laplace_b(double const*, unsigned long) (_Z25research_helper_laplace_bPKdm): link the library that defines it, or build with qflow_add_plugin, which refuses undefined symbols" "$tmp/plain-load.log" ||
  { cat "$tmp/plain-load.log" >&2; fail "the load error does not name the demangled symbol and the fix"; }

# A plugin built by another compiler: the package warns while configuring, the host refuses it.
if command -v clang++ >/dev/null && [ "$("$cxx" --version 2>/dev/null | head -1 | grep -c clang)" = 0 ]; then
  step "a plugin built with clang++ is refused"
  cmake -S "$example" -B "$tmp/clang-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_CXX_COMPILER=clang++ >"$tmp/clang-configure.log" 2>&1 || { cat "$tmp/clang-configure.log" >&2; fail "configuring with clang++ failed"; }
  grep -q "refuses to load plugins" "$tmp/clang-configure.log" || { cat "$tmp/clang-configure.log" >&2; fail "no compiler-mismatch warning"; }
  cmake --build "$tmp/clang-build" -j2 >"$tmp/clang-build.log" 2>&1 || { cat "$tmp/clang-build.log" >&2; fail "building with clang++ failed"; }
  if "$qflow" plugins --plugin "$tmp/clang-build/libqflow_example_calibrator.so" >"$tmp/clang-plugins.txt" 2>&1; then
    fail "a plugin built by clang++ was loaded by a qflow built with $cxx"
  fi
  grep -q "compiler" "$tmp/clang-plugins.txt" || { cat "$tmp/clang-plugins.txt" >&2; fail "the refusal does not name the compiler"; }
else
  echo "SKIP (part): clang++ is not installed, the compiler-mismatch refusal was not exercised"
fi

echo "sdk_out_of_tree: OK"
