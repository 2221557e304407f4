#!/usr/bin/python3
"""Top-1 of round-to-nearest vs AdaRound weights on the classifier fixtures, alone.

The same measurement `make bench-accuracy` writes into docs/accuracy.md ("AdaRound: weight
grids on the classifier fixtures"): pipelines/ptq.toml with and without the adaround pass per
fixture and weight grid, max calibrator, reduce-range off. Prints the Markdown table.
usage: tools/bench_adaround.py [--build build] [--out DIR] [--bits 4,8] [--iterations N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_accuracy import ADAROUND_ITERATIONS, ROOT, Qflow, weight_grid_lines, weight_grids  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=None, help="work folder (default BUILD/bench-adaround)")
    parser.add_argument("--bits", default="4,8")
    parser.add_argument("--iterations", type=int, default=ADAROUND_ITERATIONS)
    args = parser.parse_args()
    qflow = Qflow(os.path.abspath(args.build))
    out = os.path.abspath(args.out or os.path.join(args.build, "bench-adaround"))
    os.makedirs(out, exist_ok=True)
    rows = []
    weight_grids(qflow, out, [int(b) for b in args.bits.split(",")], args.iterations, rows)
    print("\n".join(weight_grid_lines(rows, args.iterations)))


if __name__ == "__main__":
    main()
