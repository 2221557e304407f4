#!/bin/bash
# report.html from pipelines/bpu_ptq.toml on the Fashion-MNIST sample, rendered by headless
# Chromium: the page is self-contained (no scripts, no external references), the screenshot
# is not blank, and Chromium logs no console error while loading it.
#
# Console errors: with --enable-logging=stderr --v=0 Chromium writes every console message of
# the page to stderr as "INFO:CONSOLE(line)] "message", source: URL (line)" (uncaught
# exceptions as "Uncaught ..."). The test first renders a control page with a deliberate
# script error and requires that line to appear, so a Chromium that stopped logging console
# messages fails the test instead of passing it silently; then it requires no such line for
# the report.
#
# Not blank: the PNG's IHDR must give the window size, and its decompressed IDAT stream
# (zlib, no numpy needed) must hold many distinct byte values; a blank page filters to rows
# of zeros, which gives two or three.
#
# usage: check_report_chromium.sh QFLOW SOURCE_DIR WORK_DIR   (exit 77: skipped)
set -u
qflow=$1 source_dir=$2 work=$3
chromium=/usr/bin/chromium
if [ ! -x "$chromium" ]; then
  echo "SKIP: $chromium is missing (Debian package 'chromium'; 'make test' installs it)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

render() {  # render URL PNG LOG
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 --screenshot="$2" --window-size=1280,2000 "$1" >"$3" 2>&1
}

# The control: a page whose script fails must show up as a console line.
printf '<!DOCTYPE html><html><body><p>control</p><script>no_such_function();</script></body></html>\n' \
  >"$work/control.html"
render "file://$work/control.html" "$work/control.png" "$work/control.log"
grep -q 'CONSOLE.*Uncaught ReferenceError' "$work/control.log" ||
  { echo "FAIL: Chromium did not log the control page's script error; cannot detect console errors:"; tail -5 "$work/control.log"; exit 1; }

# verify on the first 16 samples keeps the run short; the report compares 16 samples too.
out=$work/run
if ! "$qflow" run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx --set data=models/fashion_mnist/calib_200.npy --set verify.limit=16 --out "$out" >"$work/run.log" 2>&1; then
  echo "FAIL: bpu_ptq.toml failed: $(tail -3 "$work/run.log")"
  exit 1
fi
html=$out/report.html
[ -s "$html" ] || { echo "FAIL: $html missing"; exit 1; }
for section in summary stages placement layers histograms sensitivity precision verify perf; do
  grep -q "<section id=\"$section\">" "$html" || fail "section '$section' missing"
done
grep -qi '<script' "$html" && fail "report.html has a script"
grep -Eqi '(src|href)="(https?:|//)|url\(|@import' "$html" && fail "report.html references something outside itself"
[ "$(grep -c '<svg' "$html")" -ge 2 ] || fail "report.html has fewer than two SVG charts"

render "file://$html" "$work/report.png" "$work/report.log"
[ -s "$work/report.png" ] || fail "no screenshot: $(tail -3 "$work/report.log")"
if grep -q 'CONSOLE' "$work/report.log"; then
  fail "console messages while loading report.html:"
  grep 'CONSOLE' "$work/report.log"
fi
python3 - "$work/report.png" <<'PY' || fail "the screenshot looks blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, size = 8, b"", None
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        size = struct.unpack(">II", body[:8])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
distinct = len(set(raw))
nonzero = sum(1 for b in raw[::97] if b) / len(raw[::97])
print("screenshot %dx%d, %d bytes, %d distinct filtered byte values, %.1f%% non-zero" % (
    size[0], size[1], len(data), distinct, 100 * nonzero))
sys.exit(0 if size == (1280, 2000) and distinct > 32 and nonzero > 0.01 else 1)
PY
[ $failed = 0 ] && echo "report.html: $(stat -c %s "$html") bytes, rendered without console errors"
exit $failed
