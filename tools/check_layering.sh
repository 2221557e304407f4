#!/usr/bin/env bash
# The layering rules the build does not enforce by itself (docs/architecture.md, "Layers"):
#  1. the host names no target: no file under framework/ or sdk/ mentions bpu, hbm or .bc;
#  2. nothing outside the runtime includes the runtime's private headers: code elsewhere
#     includes runtime/include (qflow/runtime.h, qflow/runtime/*.h) only. The runtime's own
#     tests (tests/runtime) and fuzz harnesses (fuzz/) may reach inside it.
# Prints every offending line and exits 1 when a rule is broken.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
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

[ $status = 0 ] && echo "layering: framework/ and sdk/ name no target; runtime/ private headers stay inside"
exit $status
