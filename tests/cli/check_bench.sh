#!/bin/bash
# Runs `qflow bench` and checks the JSON it prints: the engine, threads, sample and run counts,
# one time per run, statistics that are consistent with those times, and the instruction sets
# it ran ("isa": the cap, "--isa NAME" if ARGS give one, and each kernel family's choice).
# With --profile in ARGS, the per-op table: consistent times, and the rows QFLOW_BENCH_OPS
# names ("op:nodes,op:nodes,...").
# usage: check_bench.sh QFLOW DATA_DIR ENGINE THREADS SAMPLES RUNS -- ARGS...
# The command runs in DATA_DIR; "@LOWERED@" in ARGS is replaced by $QFLOW_LOWERED.
set -u
qflow=$1 data_dir=$2 engine=$3 threads=$4 samples=$5 runs=$6
shift 6
[ "${1:-}" = "--" ] && shift
args=()
for a in "$@"; do args+=("${a//@LOWERED@/${QFLOW_LOWERED:-}}"); done
cd "$data_dir" || exit 1
out=$("$qflow" bench "${args[@]}") || { echo "FAIL: qflow bench exited $?"; exit 1; }
/usr/bin/python3 - "$out" "$engine" "$threads" "$samples" "$runs" "${args[@]}" <<'PY'
import json, os, sys
text, engine, threads, samples, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cli = sys.argv[6:]
lines = text.strip().splitlines()
assert len(lines) == 1, "expected one JSON line, got %r" % text
r = json.loads(lines[0])
assert r["engine"] == engine, r["engine"]
assert r["threads"] == threads, r["threads"]
assert r["samples"] == samples, r["samples"]
assert r["runs"] == runs and len(r["times_ms"]) == runs, (r["runs"], len(r["times_ms"]))
t = sorted(r["times_ms"])
assert t[0] >= 0 and r["min_ms"] == t[0], (r["min_ms"], t)
assert r["p10_ms"] <= r["median_ms"] <= r["p90_ms"] <= t[-1] + 1e-9, r
mid = len(t) // 2
median = t[mid] if len(t) % 2 else (t[mid - 1] + t[mid]) / 2
assert abs(r["median_ms"] - median) <= 1e-9 * max(1.0, median), (r["median_ms"], median)
assert abs(r["mean_ms"] - sum(t) / len(t)) <= 1e-6, r["mean_ms"]
assert r["load_ms"] >= 0 and r["peak_rss_mib"] > 1, r
cap = cli[cli.index("--isa") + 1] if "--isa" in cli else None
assert r["isa"].startswith("cap %s: float sgemm " % (cap or "")) if cap else r["isa"].startswith("cap "), r["isa"]
if cap == "portable":
    assert r["isa"] == "cap portable: float sgemm portable, depthwise portable; integer portable", r["isa"]
if "--profile" in cli:
    p = r["profile"]
    assert abs(p["sample_ms"] - r["mean_ms"]) <= 1e-9 * max(1.0, r["mean_ms"]), (p["sample_ms"], r["mean_ms"])
    ops = p["ops"]
    assert ops and all(o["nodes"] >= 1 and o["ms"] >= 0 for o in ops), ops
    assert [o["ms"] for o in ops] == sorted((o["ms"] for o in ops), reverse=True), ops
    total = sum(o["ms"] for o in ops)
    assert abs(p["outside_ms"] - (p["sample_ms"] - total)) <= 1e-9 * max(1.0, total), p
    assert total <= p["sample_ms"] * (1 + 1e-9), (total, p["sample_ms"])
    want = dict(w.rsplit(":", 1) for w in os.environ["QFLOW_BENCH_OPS"].split(","))
    got = {o["op"]: o["nodes"] for o in ops}
    assert got == {op: int(n) for op, n in want.items()}, (got, want)
else:
    assert "profile" not in r, r
print("ok: %s %.3f ms median over %d runs (%s)" % (engine, r["median_ms"], runs, r["isa"]))
PY
