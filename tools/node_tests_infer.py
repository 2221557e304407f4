#!/usr/bin/env python3
"""Runs every ONNX backend node test through `qflow infer`, as a user would run a model.

Each test's input_*.pb files become .npy files bound by name, `qflow infer` writes the
outputs, and they are compared with output_*.pb (rtol 1e-3, atol 1e-5; NaNs must match).
Tests whose inputs or outputs are not tensors (sequences, optionals, maps) are not counted.
Prints one line per failing test and the totals; --list writes every outcome.

Needs python3-onnx and python3-numpy (Debian). Usage:
  tools/node_tests_infer.py --qflow build/bin/qflow [--data DIR] [--filter SUBSTR] [--list FILE]
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"


def tensor_io(model):
    """Whether every graph input and output is a tensor."""
    for v in list(model.graph.input) + list(model.graph.output):
        if v.type.WhichOneof("value") != "tensor_type":
            return False
    return True


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def numbered(directory, prefix):
    out = []
    i = 0
    while os.path.exists(os.path.join(directory, f"{prefix}{i}.pb")):
        out.append(os.path.join(directory, f"{prefix}{i}.pb"))
        i += 1
    return out


def safe_file_name(name):
    out = "".join(c if c.isalnum() or c in "_-." else "_" for c in name) or "_"
    return "_" + out[1:] if out[0] == "." else out


def close(actual, expected):
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if expected.dtype.kind in "fc":
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        if not np.array_equal(np.isnan(a), np.isnan(e)):
            return "NaNs differ"
        mask = ~np.isnan(e)
        if not np.allclose(a[mask], e[mask], rtol=1e-3, atol=1e-5):
            worst = np.max(np.abs(a[mask] - e[mask])) if mask.any() else 0
            return f"values differ (max abs diff {worst:.3g})"
        return None
    if expected.dtype.kind in "OSU":
        return None if list(actual.ravel()) == list(expected.ravel()) else "values differ"
    return None if np.array_equal(actual.astype(expected.dtype), expected) else "values differ"


def run_test(qflow, test_dir):
    """'pass', 'fail: why', or None when not counted."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"), load_external_data=False)
    if not tensor_io(model):
        return None
    inputs = [v.name for v in model.graph.input if v.name not in {i.name for i in model.graph.initializer}]
    output_types = {v.name: v.type.tensor_type.elem_type for v in model.graph.output}
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not sets:
        return None
    with tempfile.TemporaryDirectory() as work:
        for s in sets:
            set_dir = os.path.join(test_dir, s)
            args = [qflow, "infer", os.path.join(test_dir, "model.onnx"), "-o", os.path.join(work, s), "--threads", "1"]
            for i, path in enumerate(numbered(set_dir, "input_")):
                name, array = read_pb(path)
                if not name:
                    name = inputs[i]
                if array.dtype.kind in "OSU":
                    return "fail: string input"
                npy = os.path.join(work, f"{s}_in{i}.npy")
                np.save(npy, array)
                args += ["--input", f"{name}={npy}"]
            done = subprocess.run(args, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                return "fail: " + (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]
            for i, path in enumerate(numbered(set_dir, "output_")):
                name, expected = read_pb(path)
                if not name:
                    name = model.graph.output[i].name
                if output_types.get(name) == onnx.TensorProto.BFLOAT16:
                    # numpy_helper gives bfloat16 as uint16 bit patterns; qflow writes float32.
                    expected = (expected.astype(np.uint32) << 16).view(np.float32)
                out = os.path.join(work, s, safe_file_name(name) + ".npy")
                if not os.path.exists(out):
                    return f"fail: output '{name}' not written"
                why = close(np.load(out), expected)
                if why:
                    return f"fail: {s} output '{name}': {why}"
    return "pass"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qflow", required=True)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--filter", default="")
    parser.add_argument("--list", help="write 'name outcome' per test to this file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    tests = sorted(d for d in os.listdir(args.data) if args.filter in d and
                   os.path.exists(os.path.join(args.data, d, "model.onnx")))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda t: run_test(args.qflow, os.path.join(args.data, t)), tests))
    counted = [(t, o) for t, o in zip(tests, outcomes) if o is not None]
    passed = sum(1 for _, o in counted if o == "pass")
    for t, o in counted:
        if o != "pass":
            print(f"{t}: {o}")
    if args.list:
        with open(args.list, "w") as f:
            for t, o in zip(tests, outcomes):
                f.write(f"{t} {o or 'not counted (non-tensor inputs or outputs)'}\n")
    print(f"{passed} of {len(counted)} counted node tests pass through qflow infer "
          f"({100.0 * passed / max(len(counted), 1):.1f}%); {len(tests) - len(counted)} not counted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
