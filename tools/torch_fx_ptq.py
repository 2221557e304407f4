#!/usr/bin/python3
"""PyTorch peer for the Fashion-MNIST accuracy benchmark: FX post-training static quantization.

Loads the float FashionMobileNet trained by make_fashion_mnist.py (its state_dict under
--work-dir), quantizes it with torch.ao.quantization FX graph mode with the fbgemm backend's
default qconfig mapping (prepare_fx -> one forward pass per calibration batch over the SAME
models/fashion_mnist/calib_200.npy qflow calibrates with -> convert_fx), evaluates top-1 on
the 10k Fashion-MNIST test images and prints one JSON line:

  {"method": "torch-fx-fbgemm", "top1": ..., "float_top1": ..., "seconds": ...,
   "engine": "onednn"}

engine names the quantized kernels that ran. Debian's python3-torch 1.13 is built without
FBGEMM (torch.backends.quantized.supported_engines is qnnpack, onednn), so the fbgemm qconfig
(HistogramObserver activations with reduce_range, per-channel int8 weights) is executed by the
oneDNN x86 kernels, which take the same per-channel scheme; with a torch that has FBGEMM the
fbgemm engine is used. --qconfig qnnpack/onednn picks those backends' default mappings
instead (method "torch-fx-<qconfig>").

seconds is the wall time of prepare + calibrate + convert only (not data loading, not model
construction, not evaluation). float_top1 is the float model's top-1 on the same images.

--time-only skips evaluation and prints {"method": "torch-fx-fbgemm", "mode": "time-only",
"seconds": ..., "engine": ...}, where seconds is the wall time of the whole PTQ step:
state_dict load and model construction, calibration data load, prepare, calibrate, convert.
One thread (torch.set_num_threads(1)) unless --threads says otherwise.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist_data  # noqa: E402
import make_fashion_mnist  # noqa: E402


def load_float_model(work_dir):
    path = os.path.join(work_dir, make_fashion_mnist.STATE_DICT)
    if not os.path.exists(path):
        sys.exit(f"torch_fx_ptq.py: {path} is missing: run tools/make_fashion_mnist.py "
                 f"--work-dir {work_dir} first")
    model = make_fashion_mnist.FashionMobileNet()
    model.load_state_dict(torch.load(path))
    return model.eval()


def pick_engine(qconfig_backend):
    """The quantized engine for a qconfig backend: itself when torch has it, else oneDNN."""
    supported = torch.backends.quantized.supported_engines
    if qconfig_backend in supported:
        return qconfig_backend
    if "onednn" in supported:
        return "onednn"
    sys.exit(f"torch_fx_ptq.py: no quantized engine for {qconfig_backend} (torch has {supported})")


def ptq(model, calib, batch_size, qconfig_backend="fbgemm"):
    """prepare_fx -> calibrate -> convert_fx with the backend's default qconfig mapping."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    example = (torch.from_numpy(calib[:1]),)
    prepared = prepare_fx(model, get_default_qconfig_mapping(qconfig_backend), example)
    with torch.no_grad():
        for i in range(0, len(calib), batch_size):
            prepared(torch.from_numpy(calib[i:i + batch_size]))
    return convert_fx(prepared)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", default=make_fashion_mnist.DEFAULT_WORK_DIR,
                        help="holds the float state_dict written by make_fashion_mnist.py")
    parser.add_argument("--calib", default=os.path.join(make_fashion_mnist.DEFAULT_OUT_DIR,
                                                        "calib_200.npy"))
    parser.add_argument("--data-dir", default=fashion_mnist_data.DEFAULT_DIR)
    parser.add_argument("--calib-batch-size", type=int, default=50)
    parser.add_argument("--qconfig", default="fbgemm", choices=("fbgemm", "onednn", "qnnpack"),
                        help="whose default qconfig mapping to use (default fbgemm)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--time-only", action="store_true",
                        help="only time the whole PTQ step, model load included")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    engine = pick_engine(args.qconfig)
    torch.backends.quantized.engine = engine
    method = f"torch-fx-{args.qconfig}"
    torch.manual_seed(make_fashion_mnist.SEED)

    if args.time_only:
        start = time.perf_counter()
        model = load_float_model(args.work_dir)
        calib = np.load(args.calib)
        ptq(model, calib, args.calib_batch_size, args.qconfig)
        seconds = time.perf_counter() - start
        print(json.dumps({"method": method, "mode": "time-only", "seconds": round(seconds, 4),
                          "engine": engine}))
        return

    calib = np.load(args.calib)
    x_test, y_test = fashion_mnist_data.load("test", args.data_dir)
    model = load_float_model(args.work_dir)
    float_top1 = make_fashion_mnist.evaluate(model, x_test, y_test)
    start = time.perf_counter()
    quantized = ptq(model, calib, args.calib_batch_size, args.qconfig)
    seconds = time.perf_counter() - start
    top1 = make_fashion_mnist.evaluate(quantized, x_test, y_test)
    print(json.dumps({"method": method, "top1": round(top1, 4),
                      "float_top1": round(float_top1, 4), "seconds": round(seconds, 4),
                      "engine": engine}))


if __name__ == "__main__":
    main()
