#!/usr/bin/env python3
"""Silero VAD (LSTM inside If branches, state carried from frame to frame) in qflow's
interpreter against ONNX Runtime, on speech made with espeak-ng between silence and noise.

Both run the stream the same way (`qflow infer --batch-size 1 --carry`, and
tools/ort/run_ort_stream.js): every frame of 512 samples at 16 kHz is one run, the state
output of a run is the state input of the next. Prints the largest differences of the speech
probabilities and of the final state, and how many frames' speech decisions (p > 0.5) agree.

Needs espeak-ng, python3-numpy, node and onnxruntime-node (tools/fetch_npm.sh --ort-only;
the models: tools/fetch_npm.sh --zoo). Exits 1 when a difference exceeds 1e-4.
Usage: tools/vad_agreement.py --build build --model silero_vad_v5.onnx [--work DIR]
                              [--opt-level all|disabled]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import wave

import numpy as np

RATE = 16000
FRAME = 512
SENTENCES = ["The quick brown fox jumps over the lazy dog.",
             "Please call me back at seven thirty tomorrow morning."]


def speech(text, work, index):
    """espeak-ng's rendering of `text`, resampled to 16 kHz float32 in [-1, 1]."""
    path = os.path.join(work, f"speech{index}.wav")
    subprocess.run(["espeak-ng", "-v", "en", "-s", "150", "-w", path, text], check=True)
    with wave.open(path) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    t = np.arange(int(len(pcm) * RATE / rate)) / RATE
    return np.interp(t, np.arange(len(pcm)) / rate, pcm).astype(np.float32)


def stream(work, sentences=SENTENCES, seed=7):
    """Silence, speech, noise, speech, silence: a signal with onsets and offsets."""
    rng = np.random.default_rng(seed)
    quiet = lambda seconds, level: (rng.standard_normal(int(seconds * RATE)) * level).astype(np.float32)
    first = speech(sentences[0], work, f"{seed}_0")
    second = speech(sentences[1], work, f"{seed}_1")
    parts = [quiet(0.5, 0.002), first, quiet(0.7, 0.03),
             0.6 * second + quiet(len(second) / RATE, 0.01), quiet(0.5, 0.002)]
    signal = np.concatenate(parts)
    frames = signal[: len(signal) // FRAME * FRAME].reshape(-1, FRAME)
    return frames.astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", required=True)
    parser.add_argument("--work")
    parser.add_argument("--opt-level", default="all", help="ONNX Runtime's graph optimisation level")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = args.work or tempfile.mkdtemp(prefix="qflow_vad_")
    os.makedirs(work, exist_ok=True)

    frames = stream(work)
    np.save(os.path.join(work, "frames.npy"), frames)
    np.save(os.path.join(work, "sr.npy"), np.array(RATE, dtype=np.int64))
    with open(args.model, "rb") as f:
        v5 = b"stateN" in f.read()
    if v5:  # one state [2, 1, 128]
        states = {"state": np.zeros((2, 1, 128), np.float32)}
        carries = [("stateN", "state")]
    else:  # legacy: h and c [2, 1, 64]
        states = {"h": np.zeros((2, 1, 64), np.float32), "c": np.zeros((2, 1, 64), np.float32)}
        carries = [("hn", "h"), ("cn", "c")]
    inputs = [f"sr={os.path.join(work, 'sr.npy')}"]
    for name, value in states.items():
        np.save(os.path.join(work, f"{name}.npy"), value)
        inputs.append(f"{name}={os.path.join(work, name + '.npy')}")

    q_out, o_out = os.path.join(work, "qflow"), os.path.join(work, "ort")
    q_cmd = [os.path.join(args.build, "bin", "qflow"), "infer", args.model, "--input",
             f"input={os.path.join(work, 'frames.npy')}", "--batch-size", "1", "-o", q_out, "--threads", "1"]
    for i in inputs:
        q_cmd += ["--input", i]
    for out, inp in carries:
        q_cmd += ["--carry", f"{out}={inp}"]
    start = time.monotonic()
    subprocess.run(q_cmd, check=True, stdout=subprocess.DEVNULL)
    q_seconds = time.monotonic() - start
    o_cmd = ["node", os.path.join(root, "tools", "ort", "run_ort_stream.js"), args.model, o_out,
             "--stream", f"input={os.path.join(work, 'frames.npy')}", "--opt-level", args.opt_level] + inputs
    for out, inp in carries:
        o_cmd += ["--carry", f"{out}={inp}"]
    subprocess.run(o_cmd, check=True)

    q_p = np.load(os.path.join(q_out, "output.npy")).ravel()
    o_p = np.load(os.path.join(o_out, "output.npy")).ravel()
    print(f"{os.path.basename(args.model)}: {len(frames)} frames of {FRAME} samples, "
          f"{int((o_p > 0.5).sum())} speech frames by ORT")
    print(f"  probability max abs diff {np.max(np.abs(q_p - o_p)):.3g}")
    worst_state = 0.0
    for out, _ in carries:
        q_s = np.load(os.path.join(q_out, out + ".npy"))
        o_s = np.load(os.path.join(o_out, out + ".npy"))
        worst_state = max(worst_state, float(np.max(np.abs(q_s - o_s))))
    print(f"  state max abs diff over all frames {worst_state:.3g}")
    agree = float(np.mean((q_p > 0.5) == (o_p > 0.5)))
    print(f"  speech decisions agree on {100 * agree:.1f}% of frames")
    print(f"  qflow infer over the stream: {q_seconds:.2f} s (the whole command)")
    return 0 if max(np.max(np.abs(q_p - o_p)), worst_state) <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
