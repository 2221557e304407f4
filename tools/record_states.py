#!/usr/bin/env python3
"""Records the recurrent states a streaming model meets, for multi-input calibration.

Runs MODEL over a stream of frames with `qflow infer --carry STATE_OUTPUT=STATE` (the state
each frame leaves is fed to the next) and writes, one row per frame:

  OUT/<input>.npy   the frames as given
  OUT/<state>.npy   the state entering each frame: the initial state, then each frame's
                    STATE_OUTPUT shifted by one frame
  OUT/<name>.npy    one row per frame of each --extra input (a constant such as a sample rate)

so that `load-data` can take `path = "<input>=OUT/<input>.npy,<state>=OUT/<state>.npy,..."`
(docs/calibration-data.md, "Recurrent state").

  python3 tools/record_states.py silero_vad.onnx --frames frames.npy --input input \\
      --state state --state-output stateN --state-shape 2,1,128 --extra sr=16000:int64 --out calib/
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def parse_extra(text):
    name, _, rest = text.partition("=")
    value, _, dtype = rest.partition(":")
    if not name or not value:
        raise argparse.ArgumentTypeError(f"--extra {text}: expected NAME=VALUE[:DTYPE]")
    return name, np.dtype(dtype or "float32").type(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--frames", required=True, help=".npy of frames, one per row")
    parser.add_argument("--input", required=True, help="the model input the frames feed")
    parser.add_argument("--state", required=True, help="the state input")
    parser.add_argument("--state-output", required=True, help="the output carried to --state")
    parser.add_argument("--state-shape", required=True, help="the state's shape, e.g. 2,1,128")
    parser.add_argument("--initial-state", help=".npy of the first frame's state (default zeros)")
    parser.add_argument("--extra", action="append", type=parse_extra, default=[],
                        help="NAME=VALUE[:DTYPE], a scalar input fed the same value every frame")
    parser.add_argument("--qflow", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "qflow"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    frames = np.load(args.frames)
    shape = tuple(int(d) for d in args.state_shape.split(","))
    initial = np.load(args.initial_state) if args.initial_state else np.zeros(shape, np.float32)
    if initial.shape != shape:
        sys.exit(f"--initial-state holds {initial.shape}, --state-shape says {shape}")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        feeds = [f"{args.input}={args.frames}"]
        state_path = os.path.join(work, "initial_state.npy")
        np.save(state_path, initial.astype(np.float32))
        feeds.append(f"{args.state}={state_path}")
        for name, value in args.extra:
            path = os.path.join(work, f"{name}.npy")
            np.save(path, np.array(value))
            feeds.append(f"{name}={path}")
        command = [args.qflow, "infer", args.model, "--batch-size", "1", "--carry", f"{args.state_output}={args.state}",
                   "--output-dir", work]
        for feed in feeds:
            command += ["--input", feed]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        left = np.load(os.path.join(work, f"{args.state_output}.npy")).reshape((len(frames),) + shape)
    entering = np.concatenate([initial[None].astype(np.float32), left[:-1]], axis=0)
    np.save(os.path.join(args.out, f"{args.input}.npy"), frames)
    np.save(os.path.join(args.out, f"{args.state}.npy"), entering)
    for name, value in args.extra:
        np.save(os.path.join(args.out, f"{name}.npy"), np.full(len(frames), value))
    print(f"{len(frames)} frames: {args.input}.npy {frames.shape}, {args.state}.npy {entering.shape}")


if __name__ == "__main__":
    main()
