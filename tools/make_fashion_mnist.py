#!/usr/bin/python3
"""Trains the Fashion-MNIST fixture: a small MobileNetV2-style classifier, exported to ONNX.

Writes, under --out-dir (default models/fashion_mnist):
  fashion_mnist.onnx    opset 13, input "input" [batch, 1, 28, 28] float32, output "logits"
                        [batch, 10]; BatchNormalization kept as separate nodes
  calib_200.npy         200 preprocessed TRAINING images [200, 1, 28, 28] float32, drawn with
                        fashion_mnist_data.calibration_indices() (fixed seed)
  float_accuracy.txt    the float test top-1 on the 10k test images, computed by torch
and, under --work-dir (default /tmp/qflow-fashion, not committed), the trained state_dict
fashion_mnist_float.pt that make_qat_model.py and torch_fx_ptq.py start from.

Deterministic: seeded torch and numpy, torch.use_deterministic_algorithms(True), one thread,
a seeded shuffling generator. Needs Debian's python3-torch, python3-onnx, python3-numpy and
the dataset-fashion-mnist package; run with /usr/bin/python3. The outputs are committed;
qflow never runs Python.
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT_DIR = os.path.join(REPO, "models", "fashion_mnist")
DEFAULT_WORK_DIR = "/tmp/qflow-fashion"
STATE_DICT = "fashion_mnist_float.pt"
SEED = 20260101


def conv_bn(in_ch, out_ch, kernel, stride=1, groups=1, relu6=True):
    layers = [nn.Conv2d(in_ch, out_ch, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(out_ch)]
    if relu6:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """1x1 expand conv + BN + ReLU6, 3x3 depthwise conv + BN + ReLU6, 1x1 project conv + BN,
    plus the input when stride is 1 and the channel counts match."""

    def __init__(self, in_ch, out_ch, stride, expand):
        super().__init__()
        hidden = in_ch * expand
        self.use_residual = stride == 1 and in_ch == out_ch
        self.expand = conv_bn(in_ch, hidden, 1)
        self.depthwise = conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.project = conv_bn(hidden, out_ch, 1, relu6=False)

    def forward(self, x):
        y = self.project(self.depthwise(self.expand(x)))
        return x + y if self.use_residual else y


# (out_channels, stride, expand ratio) of the inverted-residual blocks
BLOCKS = ((16, 1, 2), (24, 2, 4), (24, 1, 4), (48, 1, 3), (48, 1, 3))


class FashionMobileNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = conv_bn(1, 16, 3, stride=2)  # 28x28 -> 14x14
        blocks, in_ch = [], 16
        for out_ch, stride, expand in BLOCKS:
            blocks.append(InvertedResidual(in_ch, out_ch, stride, expand))
            in_ch = out_ch
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Linear(in_ch, num_classes)

    def forward(self, x):
        return self.classifier(self.flatten(self.pool(self.blocks(self.stem(x)))))


def setup_determinism(seed=SEED):
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)


def evaluate(model, x, y, batch_size=500):
    """Top-1 accuracy of `model` on float32 numpy images x and int64 labels y."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            logits = model(torch.from_numpy(x[i:i + batch_size]))
            correct += int((logits.argmax(1).numpy() == y[i:i + batch_size]).sum())
    return correct / len(x)


def train(model, x, y, epochs, batch_size, lr, seed=SEED, log=print):
    """Adam with a one-cycle learning-rate schedule; shuffling from a seeded generator."""
    generator = torch.Generator().manual_seed(seed)
    steps = epochs * (len(x) // batch_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps)
    loss_fn = nn.CrossEntropyLoss()
    # channels_last: CPU depthwise convolutions run about twice as fast in that layout
    model.to(memory_format=torch.channels_last)
    xt = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
    yt = torch.from_numpy(y)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x), generator=generator)
        total, start = 0.0, time.time()
        for b in range(len(x) // batch_size):
            idx = order[b * batch_size:(b + 1) * batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            optimizer.step()
            schedule.step()
            total += float(loss)
        log(f"epoch {epoch + 1}/{epochs}: mean loss {total / (len(x) // batch_size):.4f} "
            f"({time.time() - start:.0f} s)")
    model.to(memory_format=torch.contiguous_format)


def export_onnx(model, path):
    """Opset 13, BatchNormalization kept: eval mode but TrainingMode.PRESERVE, because
    TrainingMode.EVAL runs torch's eval peephole pass, which folds BatchNormalization into
    the preceding Conv even with do_constant_folding=False."""
    import onnx
    model.eval()
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    ops = [n.op_type for n in proto.graph.node]
    if "BatchNormalization" not in ops:
        raise RuntimeError(f"{path}: the export folded every BatchNormalization")
    for node in proto.graph.node:
        if node.op_type == "BatchNormalization":
            for a in node.attribute:
                if a.name == "training_mode" and a.i != 0:
                    raise RuntimeError(f"{path}: {node.name} exported in training mode")
    return ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=DEFAULT_OUT_DIR)
    parser.add_argument("--work-dir", default=DEFAULT_WORK_DIR,
                        help="where the trained state_dict is written (not committed)")
    parser.add_argument("--data-dir", default=fashion_mnist_data.DEFAULT_DIR)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=4e-3)
    args = parser.parse_args()

    setup_determinism()
    t0 = time.time()
    x_train, y_train = fashion_mnist_data.load("train", args.data_dir)
    x_test, y_test = fashion_mnist_data.load("test", args.data_dir)

    model = FashionMobileNet()
    params = sum(p.numel() for p in model.parameters())
    print(f"FashionMobileNet: {params} parameters")
    t_train = time.time()
    train(model, x_train, y_train, args.epochs, args.batch_size, args.lr)
    t_train = time.time() - t_train
    top1 = evaluate(model, x_test, y_test)
    print(f"float test top-1 {top1:.4f}, training took {t_train:.0f} s")

    os.makedirs(args.out_dir, exist_ok=True)
    os.makedirs(args.work_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.work_dir, STATE_DICT))
    onnx_path = os.path.join(args.out_dir, "fashion_mnist.onnx")
    ops = export_onnx(model, onnx_path)
    calib = x_train[fashion_mnist_data.calibration_indices()]
    np.save(os.path.join(args.out_dir, "calib_200.npy"), np.ascontiguousarray(calib))
    with open(os.path.join(args.out_dir, "float_accuracy.txt"), "w") as f:
        f.write(f"{top1:.4f}\n")
    histogram = {op: ops.count(op) for op in sorted(set(ops))}
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes, ops {histogram}), "
          f"calib_200.npy {calib.shape}, float_accuracy.txt; "
          f"state_dict in {args.work_dir}/{STATE_DICT}; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
