#!/usr/bin/python3
"""Writes the fixtures of the CLI golden tests into tests/cli/data/.

Small valid models (tiny*.onnx) and .npy inputs with their expected outputs, malformed
models (one defect each) and .npy files NumPy writes in every format version. Values are
small binary fractions so the expected outputs are exact in float32 whatever the
summation order. Needs python3-onnx and python3-numpy; the outputs are committed.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy.lib.format as npy_format

OPSET = [helper.make_opsetid("", 13)]


def model(nodes, inputs, outputs, inits=(), name="g"):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, list(inits)),
                          opset_imports=OPSET, producer_name="qflow-tests")
    m.ir_version = 7
    return m


def tiny(batch):
    """y = relu(x @ W + b): x [batch, 3] -> y [batch, 2]."""
    w = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.5]], np.float32)
    b = np.array([0.5, -0.25], np.float32)
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["xwb"], name="add"),
         helper.make_node("Relu", ["xwb"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], name="tiny"), w, b


def two_inputs():
    """out/sum = a + b, out/prod = a * b with a, b [N, 2]: output names need sanitising."""
    return model(
        [helper.make_node("Add", ["a", "b"], ["out/sum"], name="add"),
         helper.make_node("Mul", ["a", "b"], ["out/prod"], name="mul")],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("out/sum", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("out/prod", TensorProto.FLOAT, ["N", 2])], name="two_inputs")


def relu_model(nodes, extra_inits=(), input_name="x", output_name="y"):
    return model(nodes, [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 4])],
                 [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, 4])], extra_inits)


def bad_models(valid_bytes):
    out = {}
    out["truncated.onnx"] = valid_bytes[: len(valid_bytes) // 2]
    out["garbage.onnx"] = b"this is not an ONNX model\n" * 4
    # a -> b -> a: each node consumes the other's output.
    out["cycle.onnx"] = relu_model([
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Identity", ["a"], ["y"], name="third")]).SerializeToString()
    out["undefined_input.onnx"] = relu_model([
        helper.make_node("Add", ["x", "ghost"], ["y"], name="add_ghost")]).SerializeToString()
    out["unknown_op.onnx"] = relu_model([
        helper.make_node("FrobnicateV2", ["x"], ["y"], name="frob")]).SerializeToString()
    huge = TensorProto()
    huge.name = "w"
    huge.data_type = TensorProto.FLOAT
    huge.dims.extend([1 << 40, 1 << 40])
    out["overflow.onnx"] = relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                      [huge]).SerializeToString()
    short = TensorProto()
    short.name = "w"
    short.data_type = TensorProto.FLOAT
    short.dims.extend([1, 4])
    short.raw_data = np.zeros(3, np.float32).tobytes()
    out["size_mismatch.onnx"] = relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                           [short]).SerializeToString()
    return out


def npy_fixtures(folder):
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "f32_2x3.npy"), np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
    np.save(os.path.join(folder, "bool_4.npy"), np.array([True, False, False, True]))
    np.save(os.path.join(folder, "f16_3.npy"), np.array([1.5, -2.0, 65504], dtype=np.float16))
    np.save(os.path.join(folder, "i64_scalar.npy"), np.array(-7, dtype=np.int64))
    np.save(os.path.join(folder, "u8_empty.npy"), np.zeros((0, 5), dtype=np.uint8))
    with open(os.path.join(folder, "i16_v2.npy"), "wb") as f:
        npy_format.write_array(f, np.array([[1, -2], [3, -4]], dtype=np.int16), version=(2, 0))
    with open(os.path.join(folder, "u16_v3.npy"), "wb") as f:
        npy_format.write_array(f, np.array([1, 65535], dtype=np.uint16), version=(3, 0))
    np.save(os.path.join(folder, "fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(os.path.join(folder, "big_endian.npy"), np.arange(3, dtype=">f4"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out-dir", default=os.path.join(root, "tests", "cli", "data"))
    args = parser.parse_args()
    d = args.out_dir
    os.makedirs(d, exist_ok=True)

    tiny_n, w, b = tiny("N")
    tiny_1, _, _ = tiny(1)
    for name, m in (("tiny.onnx", tiny_n), ("tiny_b1.onnx", tiny_1), ("two_inputs.onnx", two_inputs())):
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(d, name))

    x = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 4.0
    np.save(os.path.join(d, "x_4x3.npy"), x)
    np.save(os.path.join(d, "tiny_expected_y.npy"), np.maximum(x @ w + b, 0).astype(np.float32))
    np.save(os.path.join(d, "x_4x5.npy"), np.zeros((4, 5), np.float32))
    np.save(os.path.join(d, "x_4x3_f64.npy"), x.astype(np.float64))
    a = np.array([[1, 2], [3, 4], [5, 6]], np.float32) / 2
    bb = np.array([[-1, 0.5], [2, 8], [0.25, -3]], np.float32)
    np.save(os.path.join(d, "a_3x2.npy"), a)
    np.save(os.path.join(d, "b_3x2.npy"), bb)
    np.save(os.path.join(d, "b_2x2.npy"), bb[:2])
    np.save(os.path.join(d, "two_inputs_expected_sum.npy"), a + bb)
    np.save(os.path.join(d, "two_inputs_expected_prod.npy"), a * bb)

    for name, data in bad_models(tiny_n.SerializeToString()).items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    npy_fixtures(os.path.join(d, "npy"))
    print("wrote", d)


if __name__ == "__main__":
    main()
