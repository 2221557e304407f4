#!/usr/bin/env bash
# The device runtime as its own project: configures, builds and installs runtime/ alone in a
# temporary folder, proves no compile saw a header of protobuf, ONNX, Eigen, toml11 or Boost,
# then builds a C application against the installed pkg-config file (and a CMake one against
# find_package(qflow-runtime)) and runs it on a .hbm the test suite wrote.
#   runtime_standalone.sh SOURCE_ROOT LOWERED_DIR [WORK]
# LOWERED_DIR holds tiny.hbm, x.npy and y_expected.npy (tests/cli/make_lowered_models.cpp).
# With WORK the build is kept there between runs and the installed (and moved) runtime stays
# in WORK/moved for the example applications (tests/apps); without it, a temporary folder.
set -euo pipefail
root=$1
lowered=$2
if [ $# -ge 3 ]; then
  work=$3
  mkdir -p "$work"
  rm -rf "$work/prefix" "$work/moved" "$work/consumer"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

fail() { echo "runtime_standalone: $*" >&2; exit 1; }

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Makefiles, so each object leaves a compiler-written .d file naming every header it read.
cmake -S "$root/runtime" -B "$work/build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" "${launcher[@]}" > "$work/configure.log" ||
  { cat "$work/configure.log"; fail "configure failed"; }
cmake --build "$work/build" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build failed"; }
cmake --install "$work/build" > "$work/install.log" || fail "install failed"

# The include path names runtime/ folders only, and no object read a foreign header.
grep -q '"command"' "$work/build/compile_commands.json" || fail "no compile commands"
foreign_flags=$(grep -oE -- '-(I|isystem) ?[^ "]+' "$work/build/compile_commands.json" | sort -u |
  grep -vE -- "-(I|isystem) ?($root/runtime|$work/build)" || true)
[ -z "$foreign_flags" ] || fail "include path outside runtime/: $foreign_flags"
depfiles=$(find "$work/build" -name '*.o.d')
[ -n "$depfiles" ] || fail "no dependency files to check"
foreign_headers=$(cat $depfiles | grep -oE '[^ ]*(google/protobuf|onnx/|eigen3|toml11|toml\.hpp|boost/)[^ ]*' |
  sort -u || true)
[ -z "$foreign_headers" ] || fail "the runtime read headers it must not need: $foreign_headers"
outside=$(cat $depfiles | tr ' ' '\n' | grep -E '^/' | grep -vE "^($root/runtime/|$work/build/|/usr/include/|/usr/lib/gcc/)" |
  sort -u || true)
[ -z "$outside" ] || fail "headers from outside runtime/ and the C++ library: $outside"

prefix=$work/prefix
for f in include/qflow/runtime.h include/qflow/core/status.h include/qflow/runtime/executor.h \
         lib/libqflow_runtime.so lib/pkgconfig/qflow-runtime.pc lib/cmake/qflow-runtime/qflow-runtimeConfig.cmake; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
# Moved after installing: the package files must not name the install prefix.
mv "$prefix" "$work/moved"
prefix=$work/moved

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$work/app" "$root/tests/runtime/standalone_app.c" \
  $(pkg-config --cflags --libs qflow-runtime) -Wl,-rpath,"$(pkg-config --variable=libdir qflow-runtime)" ||
  fail "the C application does not build against qflow-runtime.pc"
got=$("$work/app" "$lowered/tiny.hbm" "$lowered/x.npy" "$lowered/y_expected.npy") ||
  fail "the C application failed: $got"
want="platform bayes
input x: 16 values
output y: 32 values, 0 differ from the reference"
[ "$got" = "$want" ] || fail "unexpected output:
$got
expected:
$want"

# A CMake consumer finds the package and links qflow::runtime.
mkdir -p "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(qflow-runtime 0.1.0 REQUIRED)
add_executable(app "$root/tests/runtime/standalone_app.c")
target_link_libraries(app PRIVATE qflow::runtime)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer.log" &&
  cmake --build "$work/consumer/build" >> "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "find_package consumer failed"; }
got=$("$work/consumer/build/app" "$lowered/tiny.hbm" "$lowered/x.npy" "$lowered/y_expected.npy") ||
  fail "the CMake consumer failed: $got"
[ "$got" = "$want" ] || fail "the CMake consumer printed: $got"
echo "$got"
echo "runtime_standalone: built and installed alone; C and CMake consumers match the executor"
