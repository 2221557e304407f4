#!/usr/bin/env python3
"""Records the recurrent states a streaming model meets, for multi-input calibration.

Runs MODEL over a stream of frames with `qflow infer --carry OUTPUT=INPUT` (the state each
frame leaves is fed to the next) and writes, one row per frame:

  OUT/<input>.npy   the frames as given
  OUT/<state>.npy   per carried state: the state entering each frame, that is the initial
                    state (zeros), then each frame's OUTPUT shifted by one frame
  OUT/<name>.npy    per --extra input: the same value on every row (a sample rate)

so that `load-data` can take `path = "<input>=OUT/<input>.npy,<state>=OUT/<state>.npy,..."`
(docs/calibration-data.md, "Recurrent state").

  python3 tools/record_states.py silero_vad.onnx --frames frames.npy --input input \\
      --carry stateN=state:2,1,128 --extra sr=16000:int64 --out calib/
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np


def parse_carry(text):
    """OUTPUT=INPUT:D0,D1,..."""
    output, _, rest = text.partition("=")
    state, _, dims = rest.partition(":")
    if not output or not state or not dims:
        raise argparse.ArgumentTypeError(f"--carry {text}: expected OUTPUT=INPUT:D0,D1,...")
    return output, state, tuple(int(d) for d in dims.split(","))


def parse_extra(text):
    """NAME=VALUE[:DTYPE]"""
    name, _, rest = text.partition("=")
    value, _, dtype = rest.partition(":")
    if not name or not value:
        raise argparse.ArgumentTypeError(f"--extra {text}: expected NAME=VALUE[:DTYPE]")
    return name, np.dtype(dtype or "float32").type(value)


def run_stream(qflow, model, frames_path, input_name, carries, extras, work):
    """`qflow infer` over the frames, one run each, the carried states starting at zeros;
    the outputs, stacked over frames, are written into `work`."""
    os.makedirs(work, exist_ok=True)
    command = [qflow, "infer", model, "--batch-size", "1", "--output-dir", work, "--input", f"{input_name}={frames_path}"]
    for output, state, shape in carries:
        path = os.path.join(work, f"initial_{state}.npy")
        np.save(path, np.zeros(shape, np.float32))
        command += ["--input", f"{state}={path}", "--carry", f"{output}={state}"]
    for name, value in extras:
        path = os.path.join(work, f"{name}.npy")
        np.save(path, np.array(value))
        command += ["--input", f"{name}={path}"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def record(qflow, model, frames_path, input_name, carries, extras, out):
    """Writes the calibration sources into `out`; returns {input name: path}."""
    frames = np.load(frames_path)
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        run_stream(qflow, model, frames_path, input_name, carries, extras, work)
        left = {state: np.load(os.path.join(work, f"{output}.npy")).reshape((len(frames),) + shape)
                for output, state, shape in carries}
    paths = {input_name: os.path.join(out, f"{input_name}.npy")}
    np.save(paths[input_name], frames)
    for output, state, shape in carries:
        entering = np.concatenate([np.zeros((1,) + shape, np.float32), left[state][:-1]], axis=0)
        paths[state] = os.path.join(out, f"{state}.npy")
        np.save(paths[state], entering)
    for name, value in extras:
        paths[name] = os.path.join(out, f"{name}.npy")
        np.save(paths[name], np.full(len(frames), value))
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--frames", required=True, help=".npy of frames, one per row")
    parser.add_argument("--input", required=True, help="the model input the frames feed")
    parser.add_argument("--carry", action="append", type=parse_carry, required=True,
                        help="OUTPUT=INPUT:SHAPE, a state the model hands to itself; repeat for several")
    parser.add_argument("--extra", action="append", type=parse_extra, default=[],
                        help="NAME=VALUE[:DTYPE], an input fed the same value every frame")
    parser.add_argument("--qflow", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "qflow"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    paths = record(args.qflow, args.model, args.frames, args.input, args.carry, args.extra, args.out)
    print(",".join(f"{name}={path}" for name, path in paths.items()))


if __name__ == "__main__":
    main()
