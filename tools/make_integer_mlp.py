#!/usr/bin/env python3
"""A transformer-sized MLP the way ONNX Runtime's dynamic quantization writes it, for timing
qflow's integer kernels against ORT.

Two layers, [1, T, 768] -> 3072 -> 768, each DynamicQuantizeLinear on the activations, then
MatMulInteger with per-tensor int8 weights, Cast to float and a Mul by the product of the two
scales (the first layer followed by Relu). Weights are drawn from a seeded generator; the
model is about 5 MB, so it is generated rather than committed.
Usage: tools/make_integer_mlp.py OUT_DIR [--tokens 128]
  writes OUT_DIR/integer_mlp.onnx and OUT_DIR/integer_mlp_input.npy ([1, T, 768] float32)
Then: qflow bench OUT_DIR/integer_mlp.onnx --data OUT_DIR/integer_mlp_input.npy --threads 2
      node tools/ort/bench_ort.js OUT_DIR/integer_mlp.onnx --data OUT_DIR/integer_mlp_input.npy --threads 2
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def layer(nodes, inits, index, x, k, n, rng, relu):
    w = rng.integers(-127, 128, size=(k, n), dtype=np.int8)
    scale = np.float32(0.02 / np.sqrt(k))
    i = str(index)
    inits += [numpy_helper.from_array(w, "w" + i), numpy_helper.from_array(np.int8(0), "wzp" + i),
              numpy_helper.from_array(scale, "ws" + i)]
    nodes += [
        helper.make_node("DynamicQuantizeLinear", [x], ["q" + i, "s" + i, "z" + i]),
        helper.make_node("MatMulInteger", ["q" + i, "w" + i, "z" + i, "wzp" + i], ["mm" + i]),
        helper.make_node("Cast", ["mm" + i], ["mmf" + i], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s" + i, "ws" + i], ["sc" + i]),
        helper.make_node("Mul", ["mmf" + i, "sc" + i], ["y" + i]),
    ]
    if not relu:
        return "y" + i
    nodes.append(helper.make_node("Relu", ["y" + i], ["r" + i]))
    return "r" + i


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    nodes, inits = [], []
    hidden = layer(nodes, inits, 1, "x", 768, 3072, rng, relu=True)
    y = layer(nodes, inits, 2, hidden, 3072, 768, rng, relu=False)
    graph = helper.make_graph(nodes, "integer_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, args.tokens, 768])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, args.tokens, 768])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    os.makedirs(args.out_dir, exist_ok=True)
    onnx.save(model, os.path.join(args.out_dir, "integer_mlp.onnx"))
    x = rng.normal(0.0, 1.0, size=(1, args.tokens, 768)).astype(np.float32)
    np.save(os.path.join(args.out_dir, "integer_mlp_input.npy"), x)


if __name__ == "__main__":
    main()
