#!/usr/bin/env node
// Synthesizes deterministic text-like images and writes them as PP-OCR model inputs (.npy).
// Usage: gen_inputs.js det|rec|cls OUT_DIR [--count N] [--seed S] [--size HxW[,HxW...]] [--png]
// Writes OUT_DIR/input_<i>.npy (1x3xHxW float32, normalised as the model expects) and, with
// --png, OUT_DIR/input_<i>.png to look at. The same arguments always give the same bytes.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const { writeNpy } = require('./npy');

// Shapes and normalisation of PaddleOCR's own preprocessing for each model.
const MODELS = {
  // DetResizeForTest + NormalizeImage: sides multiple of 32, ImageNet mean/std on [0,1].
  det: { sizes: [[320, 320], [288, 416], [352, 256]], mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], lines: 'page' },
  // RecResizeImg: height 48, (x/255 - 0.5) / 0.5.
  rec: { sizes: [[48, 320]], mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], lines: 'single' },
  // ClsResizeImg: 48x192, same normalisation as rec; the classifier tells 0 from 180 degrees.
  cls: { sizes: [[48, 192]], mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], lines: 'single' },
};

function mulberry32(seed) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.range = (lo, hi) => lo + (hi - lo) * next();
  next.int = (lo, hi) => Math.floor(next.range(lo, hi + 1));
  next.gauss = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  return next;
}

class Canvas {
  constructor(h, w) {
    this.h = h;
    this.w = w;
    this.rgb = new Float32Array(h * w * 3);
  }

  paper(rnd) {
    const base = [rnd.range(215, 250), rnd.range(210, 245), rnd.range(195, 240)];
    // Uneven lighting, as in a photographed page.
    const gx = rnd.range(-25, 25) / this.w;
    const gy = rnd.range(-25, 25) / this.h;
    const sigma = rnd.range(2, 7);
    for (let y = 0; y < this.h; y++) {
      for (let x = 0; x < this.w; x++) {
        const shade = gx * x + gy * y + sigma * rnd.gauss();
        for (let c = 0; c < 3; c++) this.rgb[(y * this.w + x) * 3 + c] = base[c] + shade;
      }
    }
  }

  // Anti-aliased thick segment blended towards `ink`.
  segment(x0, y0, x1, y1, width, ink) {
    const r = width / 2;
    const xa = Math.max(0, Math.floor(Math.min(x0, x1) - r - 1));
    const xb = Math.min(this.w - 1, Math.ceil(Math.max(x0, x1) + r + 1));
    const ya = Math.max(0, Math.floor(Math.min(y0, y1) - r - 1));
    const yb = Math.min(this.h - 1, Math.ceil(Math.max(y0, y1) + r + 1));
    const dx = x1 - x0;
    const dy = y1 - y0;
    const len2 = dx * dx + dy * dy || 1e-9;
    for (let y = ya; y <= yb; y++) {
      for (let x = xa; x <= xb; x++) {
        const t = Math.min(1, Math.max(0, ((x - x0) * dx + (y - y0) * dy) / len2));
        const d = Math.hypot(x - (x0 + t * dx), y - (y0 + t * dy));
        const cover = Math.min(1, Math.max(0, r + 0.5 - d));
        if (cover <= 0) continue;
        const p = (y * this.w + x) * 3;
        for (let c = 0; c < 3; c++) this.rgb[p + c] += cover * (ink[c] - this.rgb[p + c]);
      }
    }
  }

  clamp() {
    for (let i = 0; i < this.rgb.length; i++) this.rgb[i] = Math.min(255, Math.max(0, this.rgb[i]));
  }

  rotate180() {
    this.rgb = Float32Array.from({ length: this.rgb.length }, (_, i) => {
      const px = this.h * this.w - 1 - Math.floor(i / 3);
      return this.rgb[px * 3 + (i % 3)];
    });
  }
}

// A glyph is a few strokes between points of a 3x3 grid, like a CJK character or a Latin letter.
function glyph(canvas, rnd, x, y, size, ink) {
  const strokes = rnd.int(3, 7);
  const width = Math.max(1.2, size * rnd.range(0.07, 0.12));
  const pt = () => [x + size * (0.1 + 0.4 * rnd.int(0, 2)) + rnd.range(-1, 1),
                    y + size * (0.1 + 0.4 * rnd.int(0, 2)) + rnd.range(-1, 1)];
  for (let s = 0; s < strokes; s++) {
    let [ax, ay] = pt();
    const pieces = rnd() < 0.3 ? 2 : 1;
    for (let k = 0; k < pieces; k++) {
      let [bx, by] = pt();
      if (ax === bx && ay === by) bx += size * 0.4;
      canvas.segment(ax, ay, bx, by, width, ink);
      [ax, ay] = [bx, by];
    }
  }
}

// Seven-segment digits: shapes the recogniser has certainly seen, so its output is not all blank.
const SEGMENTS = [[0, 0, 1, 0], [1, 0, 1, 1], [1, 1, 1, 2], [0, 2, 1, 2], [0, 1, 0, 2], [0, 0, 0, 1], [0, 1, 1, 1]];
const DIGITS = [0x3f, 0x06, 0x5b, 0x4f, 0x66, 0x6d, 0x7d, 0x07, 0x7f, 0x6f];

function digit(canvas, rnd, x, y, size, ink) {
  const bits = DIGITS[rnd.int(0, 9)];
  const width = Math.max(1.2, size * rnd.range(0.08, 0.12));
  const sx = size * 0.45;
  const sy = size * 0.45;
  const slant = rnd.range(0, 0.15) * size;
  SEGMENTS.forEach(([ax, ay, bx, by], k) => {
    if (!(bits & (1 << k))) return;
    canvas.segment(x + slant * (1 - ay / 2) + ax * sx, y + 0.05 * size + ay * sy,
                   x + slant * (1 - by / 2) + bx * sx, y + 0.05 * size + by * sy, width, ink);
  });
}

function textLine(canvas, rnd, x0, xMax, baseline, size, digitShare) {
  const darkness = rnd.range(10, 80);
  const ink = [darkness + rnd.range(0, 20), darkness + rnd.range(0, 20), darkness + rnd.range(0, 30)];
  let x = x0;
  while (x + size < xMax) {
    if (rnd() < digitShare) {
      digit(canvas, rnd, x, baseline - size, size, ink);
      x += size * rnd.range(0.65, 0.8);
    } else {
      glyph(canvas, rnd, x, baseline - size, size, ink);
      x += size * rnd.range(1.0, 1.2);
    }
    if (rnd() < 0.12) x += size * rnd.range(0.5, 1.5);
  }
}

function render(kind, h, w, rnd) {
  const canvas = new Canvas(h, w);
  canvas.paper(rnd);
  if (MODELS[kind].lines === 'single') {
    const size = rnd.range(0.55, 0.75) * h;
    const baseline = (h + size) / 2 + rnd.range(-2, 2);
    textLine(canvas, rnd, rnd.range(2, 12), w - rnd.range(2, 0.35 * w), baseline, size, rnd.range(0.5, 0.9));
  } else {
    // Paragraphs of lines with varied sizes and indents, leaving some blank paper.
    let y = rnd.range(8, 30);
    for (;;) {
      const size = rnd.range(12, 34);
      if (y + size > h - 6) break;
      if (rnd() < 0.85) {
        const left = rnd.range(6, 0.3 * w);
        textLine(canvas, rnd, left, w - rnd.range(6, 0.4 * w), y + size, size, rnd() < 0.5 ? 0 : 0.7);
      }
      y += size * rnd.range(1.4, 2.2);
    }
  }
  canvas.clamp();
  return canvas;
}

function toTensor(canvas, { mean, std }) {
  const { h, w, rgb } = canvas;
  const out = new Float32Array(3 * h * w);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < h * w; i++) out[c * h * w + i] = (rgb[i * 3 + c] / 255 - mean[c]) / std[c];
  }
  return out;
}

function writePng(file, canvas) {
  const { h, w, rgb } = canvas;
  const raw = Buffer.alloc(h * (w * 3 + 1));
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w * 3; x++) raw[y * (w * 3 + 1) + 1 + x] = Math.round(rgb[y * w * 3 + x]);
  }
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  fs.writeFileSync(file, Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0)),
  ]));
}

function main() {
  const argv = process.argv.slice(2);
  const opts = { count: 3, seed: 20240611, sizes: null, png: false };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--count') opts.count = Number(argv[++i]);
    else if (argv[i] === '--seed') opts.seed = Number(argv[++i]);
    else if (argv[i] === '--size') opts.sizes = argv[++i].split(',').map((s) => s.split('x').map(Number));
    else if (argv[i] === '--png') opts.png = true;
    else positional.push(argv[i]);
  }
  const [kind, outDir] = positional;
  if (!MODELS[kind] || !outDir || !(opts.count >= 1)) {
    console.error('usage: gen_inputs.js det|rec|cls OUT_DIR [--count N] [--seed S] [--size HxW[,HxW...]] [--png]');
    process.exit(2);
  }
  const model = MODELS[kind];
  const sizes = opts.sizes ?? model.sizes;
  fs.mkdirSync(outDir, { recursive: true });
  for (let i = 0; i < opts.count; i++) {
    // One stream per sample, so changing --count never changes the earlier samples.
    const rnd = mulberry32(opts.seed * 7919 + i * 104729 + kind.charCodeAt(0));
    const [h, w] = sizes[i % sizes.length];
    const canvas = render(kind, h, w, rnd);
    // Every other classifier sample is upside down, so both of its classes are exercised.
    if (kind === 'cls' && i % 2 === 1) canvas.rotate180();
    writeNpy(path.join(outDir, `input_${i}.npy`), 'float32', [1, 3, h, w], toTensor(canvas, model));
    if (opts.png) writePng(path.join(outDir, `input_${i}.png`), canvas);
  }
}

main();
