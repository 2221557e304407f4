#!/usr/bin/python3
"""Derives models/fashion_mnist/fashion_mnist_outlier.onnx from fashion_mnist.onnx: the same
float function, but a few channels of block 1's projection carried 100x larger through the
residual Add of block 2 and scaled back down by the next convolutions' weights. Plain int8
per-tensor activations lose those layers' small channels; the precision search fixes it.

The rescaling is exact algebra on linear layers (BatchNormalization scale and bias, then the
consumers' weight columns), so the float outputs change only by float32 rounding.

Usage: /usr/bin/python3 tools/make_outlier_fixture.py [SRC.onnx] [DST.onnx]
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

FACTOR = 100.0
CHANNELS = [3, 11, 17]  # of the 24 channels block 1 projects to


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "models/fashion_mnist/fashion_mnist.onnx"
    dst = sys.argv[2] if len(sys.argv) > 2 else "models/fashion_mnist/fashion_mnist_outlier.onnx"
    model = onnx.load(src)
    inits = {t.name: t for t in model.graph.initializer}

    def update(name, fn):
        array = numpy_helper.to_array(inits[name]).astype(np.float32)
        inits[name].CopyFrom(numpy_helper.from_array(fn(array.copy()).astype(np.float32), name))

    def scale_rows(array):
        array[CHANNELS] *= FACTOR
        return array

    def shrink_columns(array):
        array[:, CHANNELS] /= FACTOR
        return array

    # Both inputs of block 2's residual Add carry the channels 100x: the BatchNormalization
    # after block 1's and block 2's projections scale gamma and beta (y = gamma * x^ + beta).
    for bn in ("blocks.1.project.1", "blocks.2.project.1"):
        update(bn + ".weight", scale_rows)
        update(bn + ".bias", scale_rows)
    # Their consumers read the channels back at the original size: block 2's expansion reads
    # block 1's projection, block 3's expansion reads the Add.
    update("blocks.2.expand.0.weight", shrink_columns)
    update("blocks.3.expand.0.weight", shrink_columns)
    model.graph.name = model.graph.name + "_outlier"
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    print("wrote", dst)


if __name__ == "__main__":
    main()
