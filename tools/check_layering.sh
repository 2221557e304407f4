#!/usr/bin/env bash
# The layering rules the build does not enforce by itself (docs/architecture.md, "Layers"):
#  1. the host names no target: no file under framework/ or sdk/ mentions bpu, hbm or .bc;
#  2. nothing outside the runtime includes the runtime's private headers: code elsewhere
#     includes runtime/include (qflow/runtime.h, qflow/runtime/*.h) only. The runtime's own
#     tests (tests/runtime) and fuzz harnesses (fuzz/) may reach inside it;
#  3. with COMPONENT_TABLE (written by framework/CMakeLists.txt), each host component
#     framework/NAME/ includes only its own headers and those of the components it declares,
#     framework/NAME/ headers and the SDK headers a component implements alike.
# Prints every offending line and exits 1 when a rule is broken.
# usage: check_layering.sh [SOURCE_DIR [COMPONENT_TABLE]]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
table=${2:-}
cd "$root" || exit 2
status=0

named=$(grep -rniE 'bpu|hbm|\.bc\b' framework sdk)
if [ -n "$named" ]; then
  echo "the host names a target (framework/ and sdk/ must not mention bpu, hbm or .bc):"
  echo "$named"
  status=1
fi

# Inside runtime/ they are named relative to runtime/ ("hbm/byte_reader.h"), so both spellings count.
private=$(grep -rnE '#\s*include\s*"(runtime/)?(hbm|lowered|fixed_point|capi)/' --include='*.c' --include='*.cpp' \
  --include='*.h' framework sdk plugins tools tests | grep -v '^tests/runtime/')
if [ -n "$private" ]; then
  echo "private runtime headers included outside runtime/ (use runtime/include's qflow/runtime/*.h):"
  echo "$private"
  status=1
fi

# The component that implements each SDK header group (qflow/GROUP/... or qflow/GROUP.h).
sdk_owner() {
  case $1 in
    core | version) echo core ;;
    ir) echo ir ;;
    onnx) echo onnx ;;
    interpreter) echo interpreter ;;
    plugin) echo plugin ;;
    npy_runs) echo data ;;
    quant) echo quant ;;
    runtime) echo runtime ;;  # the device runtime's published headers (runtime/include)
    *) echo "unknown:$1" ;;
  esac
}

if [ -n "$table" ]; then
  if [ ! -f "$table" ]; then
    echo "component table $table not found (configure the build first)"
    exit 2
  fi
  while IFS=: read -r component allowed; do
    case $component in '#'* | '') continue ;; esac
    allowed=" $component $allowed "
    # Only the interpreter uses the device runtime's published kernels.
    [ "$component" = interpreter ] && allowed+="runtime "
    while IFS= read -r line; do
      file=${line%%:*}
      included=$(sed -nE 's/.*#\s*include\s*"(framework\/([a-z_]+)\/|qflow\/([a-z_]+)[\/.]).*/\2\3/p' <<<"${line#*:*:}")
      target=$included
      case $line in *'"qflow/'*) target=$(sdk_owner "$included") ;; esac
      if [[ $allowed != *" $target "* ]]; then
        echo "component '$component' includes '$target', which it does not declare (framework/CMakeLists.txt): $line"
        status=1
      fi
    done < <(grep -rnE '#\s*include\s*"(framework/|qflow/)' --include='*.cpp' --include='*.h' "framework/$component")
  done <"$table"
fi

[ $status = 0 ] && echo "layering: framework/ and sdk/ name no target; runtime/ private headers stay inside${table:+; components include only what they declare}"
exit $status
