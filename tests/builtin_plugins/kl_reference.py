#!/usr/bin/python3
"""Independent check of qflow's KL (entropy) threshold with numpy.

Usage: kl_reference.py QFLOW_BUILTIN_PLUGIN_TESTS

Runs the doctest case "kl: reference cases for kl_reference.py", which writes seeded
histograms with qflow's divergences and thresholds as JSON, then recomputes every
candidate's divergence bin by bin from the definition in docs/calibrators.md (no prefix
sums, no closed form) and compares: divergences within 1e-9 + 1e-6 relative, thresholds
within 1e-6 relative. Exits 77 (skipped) when numpy is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as error:
    print(f"kl_reference: skipped, numpy is not installed ({error}); install python3-numpy")
    sys.exit(77)


def divergences(counts, target_bins, epsilon):
    """KL(P || Q') of every candidate i = target_bins .. len(counts)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.size
    result = []
    for i in range(target_bins, n + 1):
        p = counts[:i].copy()
        p[i - 1] += counts[i:].sum()                 # outliers folded into bin i-1
        merged = i // target_bins
        level = np.minimum(np.arange(i) // merged, target_bins - 1)  # the last level takes the rest
        level_sum = np.bincount(level, weights=counts[:i], minlength=target_bins)  # Q: no outliers
        level_nonzero = np.bincount(level, weights=(p > 0).astype(np.float64), minlength=target_bins)
        q = np.zeros(i)
        nonzero = p > 0
        q[nonzero] = level_sum[level[nonzero]] / level_nonzero[level[nonzero]]
        p = p / p.sum()
        if q.sum() > 0:
            q = q / q.sum()
        hole = nonzero & (q == 0)                    # P mass Q cannot hold
        z = p[hole].sum()
        q[hole] = epsilon * p[hole]
        q = q / (1.0 + epsilon * z)
        result.append(float(np.sum(p[nonzero] * np.log(p[nonzero] / q[nonzero]))))
    return np.array(result)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kl_cases.json")
        env = dict(os.environ, QFLOW_KL_REFERENCE_JSON=path)
        run = subprocess.run([sys.argv[1], "--test-case=kl: reference cases for kl_reference.py"],
                             env=env, capture_output=True, text=True)
        if run.returncode != 0 or not os.path.exists(path):
            print(run.stdout, run.stderr)
            print("kl_reference: the test executable did not write the cases")
            return 1
        with open(path) as file:
            data = json.load(file)
    epsilon = data["epsilon"]
    failures = 0
    for case in data["cases"]:
        counts, target = case["counts"], case["target_bins"]
        expected = divergences(counts, target, epsilon)
        got = np.array(case["divergences"])
        if got.shape != expected.shape:
            print(f"{case['name']}: {got.size} divergences, expected {expected.size}")
            failures += 1
            continue
        bad = np.abs(got - expected) > 1e-9 + 1e-6 * np.abs(expected)
        best = int(np.argmin(expected))              # first minimum: ties go to the smallest i
        threshold = (best + target) * case["range"] / len(counts)
        status = "ok"
        if bad.any():
            k = int(np.argmax(bad))
            status = f"divergence of candidate {k + target}: qflow {got[k]!r}, reference {expected[k]!r}"
        elif abs(case["threshold"] - threshold) > 1e-6 * abs(threshold):
            status = f"threshold: qflow {case['threshold']!r}, reference {threshold!r}"
        if status != "ok":
            failures += 1
        print(f"{case['name']}: {len(counts)} bins, {target} levels, threshold {threshold:.6g} "
              f"(bin {best + target}), KL {expected[best]:.6g}: {status}")
    print(f"kl_reference: {len(data['cases']) - failures} of {len(data['cases'])} cases agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
