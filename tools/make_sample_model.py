#!/usr/bin/python3
"""Builds the bundled sample: a small CNN classifier for 1x28x28 images with seeded weights.

Writes models/sample/sample_cnn.onnx (opset 13, symbolic batch dimension "N") and
models/sample/input.npy (4 samples). Needs python3-onnx and python3-numpy (Debian), which
are fixture tools only: the outputs are committed and qflow never runs Python.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_weight(rng, out_channels, in_channels, k):
    fan_in = in_channels * k * k
    return (rng.standard_normal((out_channels, in_channels, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def build(rng):
    inits = []

    def add(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    nodes = [
        helper.make_node("Conv", ["input", add("conv1.weight", conv_weight(rng, 8, 1, 3)),
                                  add("conv1.bias", np.zeros(8, np.float32))],
                         ["conv1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["conv1", add("bn1.scale", rng.uniform(0.8, 1.2, 8).astype(np.float32)),
                          add("bn1.bias", rng.uniform(-0.1, 0.1, 8).astype(np.float32)),
                          add("bn1.mean", rng.uniform(-0.1, 0.1, 8).astype(np.float32)),
                          add("bn1.var", rng.uniform(0.5, 1.5, 8).astype(np.float32))],
                         ["bn1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", add("dw.weight", conv_weight(rng, 8, 1, 3)),
                                  add("dw.bias", np.zeros(8, np.float32))],
                         ["dw"], name="dw_conv", pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["dw"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool", add("conv2.weight", conv_weight(rng, 16, 8, 3)),
                                  add("conv2.bias", rng.uniform(-0.1, 0.1, 16).astype(np.float32))],
                         ["conv2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2"], ["relu3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["relu3"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", add("fc.weight", (rng.standard_normal((10, 16)) * 0.5).astype(np.float32)),
                                  add("fc.bias", np.zeros(10, np.float32))],
                         ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "sample_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="qflow-sample", producer_version="1")
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out-dir", default=os.path.join(root, "models", "sample"))
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(20240501)
    os.makedirs(args.out_dir, exist_ok=True)
    onnx.save(build(rng), os.path.join(args.out_dir, "sample_cnn.onnx"))
    images = rng.uniform(0.0, 1.0, (args.samples, 1, 28, 28)).astype(np.float32)
    np.save(os.path.join(args.out_dir, "input.npy"), images)
    print("wrote", args.out_dir)


if __name__ == "__main__":
    main()
