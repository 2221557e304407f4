#!/bin/bash
# Runs $QFLOW_BIN with the given arguments and writes pass times in its stdout as "(@MS@ ms)",
# so golden files of runs stay stable; the exit code and stderr are qflow's own.
set -o pipefail
"$QFLOW_BIN" "$@" | sed -E 's/\([0-9]+\.[0-9] ms\)/(@MS@ ms)/'
