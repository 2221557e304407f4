#!/usr/bin/python3
"""Trains the MobileNetV2-style Fashion-MNIST fixture used to check QDQ models in ONNX Runtime.

A wider network than models/fashion_mnist (MobileNetV2's expansion ratio 6, 24..96 channels,
a 1x1 head convolution before the pooling): the pointwise convolutions have hundreds of
input channels, as in real MobileNets, which is where int8 kernels that sum products in
16 bits lose accuracy (docs/quantization.md, "QDQ models in ONNX Runtime").

Writes, under --out-dir (default models/mobilenet_fashion):
  mobilenet_fashion.onnx  opset 13, input "input" [batch, 1, 28, 28] float32, output "logits"
                          [batch, 10]; BatchNormalization kept as separate nodes
  calib_200.npy           200 preprocessed TRAINING images [200, 1, 28, 28] float32, the draw
                          of fashion_mnist_data.calibration_indices() (the same images as
                          models/fashion_mnist/calib_200.npy)
  calib_200_labels.npy    their labels, int64 [200]
  float_accuracy.txt      float top-1 (torch) on the first 500 and on all 10k test images
The held-out test set is Debian's t10k split, read at run time (tools/ort/eval_classifier.js);
nothing of it is committed.

Deterministic: seeded torch and numpy, torch.use_deterministic_algorithms(True), two threads,
a seeded shuffling generator. Needs Debian's python3-torch, python3-onnx, python3-numpy and
dataset-fashion-mnist; run with /usr/bin/python3. qflow never runs Python.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist_data  # noqa: E402
from make_fashion_mnist import InvertedResidual, conv_bn, evaluate, export_onnx, setup_determinism, train  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT_DIR = os.path.join(REPO, "models", "mobilenet_fashion")
NAME = "mobilenet_fashion"
SEED = 20260219
TEST_SUBSET = 500

# (out_channels, stride, expand ratio) of the inverted-residual blocks, MobileNetV2's t = 6
BLOCKS = ((24, 2, 6), (32, 1, 6), (32, 1, 6), (64, 1, 6), (64, 1, 6), (96, 1, 6))
HEAD_CHANNELS = 256


class MobileNetFashion(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = conv_bn(1, 24, 3, stride=2)  # 28x28 -> 14x14
        blocks, in_ch = [], 24
        for out_ch, stride, expand in BLOCKS:
            blocks.append(InvertedResidual(in_ch, out_ch, stride, expand))
            in_ch = out_ch
        self.blocks = nn.Sequential(*blocks)
        self.head = conv_bn(in_ch, HEAD_CHANNELS, 1)  # MobileNetV2's last 1x1 conv
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Linear(HEAD_CHANNELS, num_classes)

    def forward(self, x):
        return self.classifier(self.flatten(self.pool(self.head(self.blocks(self.stem(x))))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=DEFAULT_OUT_DIR)
    parser.add_argument("--data-dir", default=fashion_mnist_data.DEFAULT_DIR)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    setup_determinism(SEED)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    x_train, y_train = fashion_mnist_data.load("train", args.data_dir)
    x_test, y_test = fashion_mnist_data.load("test", args.data_dir)

    model = MobileNetFashion()
    params = sum(p.numel() for p in model.parameters())
    print(f"MobileNetFashion: {params} parameters")
    t_train = time.time()
    train(model, x_train, y_train, args.epochs, args.batch_size, args.lr, seed=SEED)
    t_train = time.time() - t_train
    top1_subset = evaluate(model, x_test[:TEST_SUBSET], y_test[:TEST_SUBSET])
    top1 = evaluate(model, x_test, y_test)
    print(f"float test top-1 {top1_subset:.4f} (first {TEST_SUBSET}), {top1:.4f} (10k); "
          f"training took {t_train:.0f} s")

    os.makedirs(args.out_dir, exist_ok=True)
    onnx_path = os.path.join(args.out_dir, f"{NAME}.onnx")
    ops = export_onnx(model, onnx_path)
    indices = fashion_mnist_data.calibration_indices()
    np.save(os.path.join(args.out_dir, "calib_200.npy"), np.ascontiguousarray(x_train[indices]))
    np.save(os.path.join(args.out_dir, "calib_200_labels.npy"), y_train[indices].astype(np.int64))
    with open(os.path.join(args.out_dir, "float_accuracy.txt"), "w") as f:
        f.write(f"first{TEST_SUBSET} {top1_subset:.4f}\nall10k {top1:.4f}\n")
    histogram = {op: ops.count(op) for op in sorted(set(ops))}
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes, ops {histogram}), calib_200.npy, "
          f"calib_200_labels.npy, float_accuracy.txt; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
