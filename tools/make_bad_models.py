#!/usr/bin/python3
"""Writes the fixtures of the CLI golden tests into tests/cli/data/ and tests/hostile/data/.

Small valid models (tiny*.onnx) and .npy inputs with their expected outputs, malformed
models (one defect each) and .npy files NumPy writes in every format version. Values are
small binary fractions so the expected outputs are exact in float32 whatever the
summation order. Needs python3-onnx and python3-numpy; the outputs are committed.
"""
import argparse
import os
import zlib

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


def no_inputs():
    """y = a constant: a model that takes no input."""
    value = numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "value")
    return model([helper.make_node("Constant", [], ["y"], name="constant", value=value)], [],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], name="no_inputs")


def with_state():
    """y = x @ w + state with x [1, 3], state [2, 1, 2]: inputs whose first dimensions differ."""
    w = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.5]], np.float32)
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "state"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 2])],
        [numpy_helper.from_array(w, "w")], name="with_state"), w


def bf16_identity():
    """y = x for a bfloat16 x [3]: what qflow infer reads and writes for a type NumPy lacks."""
    return model([helper.make_node("Identity", ["x"], ["y"], name="identity")],
                 [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                 [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])], name="bf16_identity")


def unsorted(sorted_model):
    """The same model with its nodes listed consumers first: runtimes accept it, the checker not."""
    m = onnx.ModelProto()
    m.CopyFrom(sorted_model)
    nodes = list(m.graph.node)[::-1]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


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


def hostile_models():
    """Models that import refuses (or the interpreter refuses), one defect each."""
    out = {}
    # Two nodes write the same value: a graph where "a" has two producers.
    out["duplicate_value.onnx"] = relu_model([
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("Neg", ["x"], ["a"], name="second"),
        helper.make_node("Identity", ["a"], ["y"], name="third")]).SerializeToString()
    # An ONNX opset far beyond what the interpreter implements.
    m = relu_model([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    m.opset_import[0].version = 99
    out["opset99.onnx"] = m.SerializeToString()
    # Static input shapes: 4 TiB of float32, and more elements than fit in 64 bits.
    for name, dims in (("input_4tib.onnx", [1 << 20, 1 << 20]), ("input_overflow.onnx", [1 << 40, 1 << 40])):
        out[name] = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)]).SerializeToString()
    # A 4 KiB initializer: refused under --max-memory 1K, accepted otherwise.
    w = numpy_helper.from_array(np.full((1, 1024), 0.5, np.float32), "w")
    out["init_4k.onnx"] = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])],
                                [w]).SerializeToString()
    # Sizes computed at run time from the input's shape (x [N, 4], run on [1, 4]): the
    # declared shapes are symbolic, so import cannot see them; the interpreter refuses the
    # allocation under --max-memory. Shape(x) * k gives the computed shape.
    def computed_shape(last_node, k, extra_inits=()):
        nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                 helper.make_node("Mul", ["s", "k"], ["big"], name="scale"), last_node]
        inits = [numpy_helper.from_array(np.array(k, np.int64), "k")] + list(extra_inits)
        return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["A", "B"])], inits).SerializeToString()
    # Reshape to [2^20, 2^20]: a view, refused because 2^40 is not the data's 4 elements.
    out["reshape_computed.onnx"] = computed_shape(
        helper.make_node("Reshape", ["x", "big"], ["y"], name="reshape"), [1 << 20, 1 << 18])
    # ConstantOfShape [2^20, 2^20] of float: 4 TiB.
    out["constant_of_shape_huge.onnx"] = computed_shape(
        helper.make_node("ConstantOfShape", ["big"], ["y"], name="fill",
                         value=numpy_helper.from_array(np.array([0.5], np.float32))), [1 << 20, 1 << 18])
    # Expand [1, 4] to [2^38, 4]: 4 TiB.
    out["expand_huge.onnx"] = computed_shape(
        helper.make_node("Expand", ["x", "big"], ["y"], name="expand"), [1 << 38, 1])
    # Tile [1, 4] by [2^20, 2^18]: 16 TiB.
    out["tile_huge.onnx"] = computed_shape(
        helper.make_node("Tile", ["x", "big"], ["y"], name="tile"), [1 << 20, 1 << 18])
    # Equal of [2^20, 1] (ConstantOfShape, 4 MiB) and [1, 2^20] (x tiled): a 1 TiB broadcast.
    out["equal_broadcast_huge.onnx"] = model(
        [helper.make_node("ConstantOfShape", ["rows"], ["a"], name="column",
                          value=numpy_helper.from_array(np.array([0.5], np.float32))),
         helper.make_node("Tile", ["x", "repeats"], ["b"], name="row"),
         helper.make_node("Equal", ["a", "b"], ["y"], name="equal")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, ["A", "B"])],
        [numpy_helper.from_array(np.array([1 << 20, 1], np.int64), "rows"),
         numpy_helper.from_array(np.array([1, 1 << 18], np.int64), "repeats")]).SerializeToString()
    return out


def npy_header_only(path, shape):
    """A .npy file whose header declares `shape` (float32) and that holds no data at all."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (repr(tuple(shape)),)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))


def hostile_npy(folder):
    npy_header_only(os.path.join(folder, "header_4tib.npy"), (1 << 40,))
    npy_header_only(os.path.join(folder, "header_overflow.npy"), (1 << 62, 8))
    # Calibration data for tiny.onnx (x [N, 3]): wrong sample shape, NaN/Inf, no samples.
    np.save(os.path.join(folder, "calib_4x5.npy"), np.zeros((4, 5), np.float32))
    nan = np.ones((4, 3), np.float32)
    nan[2, 1] = np.nan
    nan[3, 0] = np.inf
    np.save(os.path.join(folder, "calib_nan.npy"), nan)
    np.save(os.path.join(folder, "calib_empty.npy"), np.zeros((0, 3), np.float32))
    np.save(os.path.join(folder, "calib_4x3.npy"), (np.arange(12, dtype=np.float32).reshape(4, 3) - 5) / 4)
    np.save(os.path.join(folder, "x_1x4.npy"), np.array([[1, -2, 3, -4]], np.float32) / 4)
    np.save(os.path.join(folder, "x_1x1x4x4.npy"), (np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) - 8) / 8)


def crc32_table_header(b):
    """Recomputes header_crc32 (header with the CRC field zeroed, then the section table)."""
    header_size = int.from_bytes(b[16:20], "little")
    count = int.from_bytes(b[20:24], "little")
    table = int.from_bytes(b[24:32], "little")
    entry = int.from_bytes(b[88:92], "little")
    covered = bytes(b[:92]) + b"\0\0\0\0" + bytes(b[96:header_size]) + bytes(b[table:table + count * entry])
    b[92:96] = (zlib.crc32(covered) & 0xFFFFFFFF).to_bytes(4, "little")


def hbm_section(b, index):
    table = int.from_bytes(b[24:32], "little")
    entry = int.from_bytes(b[88:92], "little")
    at = table + index * entry
    return at, int.from_bytes(b[at + 8:at + 16], "little"), int.from_bytes(b[at + 16:at + 24], "little")


def patch_tensor_dim(b, section, name, dim):
    """Sets the first dimension of tensor `name` in the inputs section (section 1, a tensor
    list) or the tensors section (section 3, the lowered tensor table) and fixes its CRC."""
    at, offset, size = hbm_section(b, section)
    p = offset
    count = int.from_bytes(b[p:p + 4], "little")
    p += 4
    for _ in range(count):
        n = int.from_bytes(b[p:p + 4], "little")
        tensor = bytes(b[p + 4:p + 4 + n]).decode()
        p += 4 + n
        if section == 1:  # dtype, layout, quant_kind, shape, [axis, scales, zero points]
            quant = b[p + 2]
            p += 3
        else:  # type, flags, shape, scale (f64), zero point (i32), [weight offset, size]
            constant = b[p + 1] & 1
            p += 2
        rank = int.from_bytes(b[p:p + 4], "little")
        if tensor == name:
            b[p + 4:p + 12] = dim.to_bytes(8, "little", signed=True)
        p += 4 + 8 * rank
        if section == 1 and quant:
            p += 4
            p += 4 + 4 * int.from_bytes(b[p:p + 4], "little")
            p += 4 + 4 * int.from_bytes(b[p:p + 4], "little")
        elif section != 1:
            p += 8 + 4 + (16 if constant else 0)
    b[at + 28:at + 32] = (zlib.crc32(bytes(b[offset:offset + size])) & 0xFFFFFFFF).to_bytes(4, "little")


def hostile_hbm(source, folder):
    """Broken copies of a valid .hbm, each with one defect behind valid CRCs unless the CRC is the defect."""
    good = open(source, "rb").read()
    out = {}
    b = bytearray(good)
    _, offset, size = hbm_section(b, 0)
    b[offset + size - 1] ^= 0x01  # last byte of the metadata section: its CRC no longer matches
    out["hbm_bad_crc.hbm"] = b
    b = bytearray(good)
    at, _, _ = hbm_section(b, 1)
    b[at + 8:at + 16] = (len(good) + 4096).to_bytes(8, "little")  # the inputs section starts past the end
    crc32_table_header(b)
    out["hbm_offset_out_of_range.hbm"] = b
    b = bytearray(good)
    b[40:56] = b"x9".ljust(16, b"\0")
    crc32_table_header(b)
    out["hbm_unknown_platform.hbm"] = b
    # Input x declares 2^40 as its first dimension, in the inputs section and in the tensor
    # table alike, so the reader gets past their consistency check to the size check.
    b = bytearray(good)
    for section in (1, 3):
        patch_tensor_dim(b, section, "x", 1 << 40)
    crc32_table_header(b)
    out["hbm_huge_input.hbm"] = b
    for name, data in out.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(data))


def write_hostile(folder, hbm_source, tiny_bytes):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tiny.onnx"), "wb") as f:
        f.write(tiny_bytes)
    for name, data in hostile_models().items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    hostile_npy(folder)
    if hbm_source:
        hostile_hbm(hbm_source, folder)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out-dir", default=os.path.join(root, "tests", "cli", "data"))
    parser.add_argument("--hostile-dir", default=os.path.join(root, "tests", "hostile", "data"),
                        help="where the fixtures of the hostile-input tests go")
    parser.add_argument("--hbm", help="a valid .hbm to derive the broken .hbm fixtures from "
                        "(default: tiny.hbm in the hostile folder, when present)")
    args = parser.parse_args()
    d = args.out_dir
    os.makedirs(d, exist_ok=True)

    tiny_n, w, b = tiny("N")
    tiny_1, _, _ = tiny(1)
    state_model, w_state = with_state()
    for name, m in (("tiny.onnx", tiny_n), ("tiny_b1.onnx", tiny_1), ("two_inputs.onnx", two_inputs()),
                    ("no_inputs.onnx", no_inputs()), ("with_state.onnx", state_model),
                    ("bf16_identity.onnx", bf16_identity())):
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(d, name))
    onnx.save(unsorted(tiny_n), os.path.join(d, "tiny_unsorted.onnx"))

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
    x1 = x[:1]
    state = np.array([[[0.5, -1.0]], [[2.0, 0.25]]], np.float32)
    np.save(os.path.join(d, "x_1x3.npy"), x1)
    np.save(os.path.join(d, "state_2x1x2.npy"), state)
    np.save(os.path.join(d, "with_state_expected_y.npy"), (x1 @ w_state + state).astype(np.float32))
    # --carry y=state over the rows of x_4x3.npy: each run adds its row's product to the last y.
    carried, ys = state, []
    for row in x:
        carried = (row[None, :] @ w_state + carried).astype(np.float32)
        ys.append(carried)
    np.save(os.path.join(d, "with_state_carry_expected_y.npy"), np.concatenate(ys, axis=0))
    # bfloat16 as uint16 bit patterns (1.0, -2.5, 0.15625) and as float32 (0.1 rounds to
    # 0.10009765625); the output comes back as float32.
    np.save(os.path.join(d, "x_bf16_bits.npy"), np.array([0x3F80, 0xC020, 0x3E20], np.uint16))
    np.save(os.path.join(d, "x_bf16_float.npy"), np.array([1.0, -2.5, 0.1], np.float32))
    np.save(os.path.join(d, "bf16_bits_expected_y.npy"), np.array([1.0, -2.5, 0.15625], np.float32))
    np.save(os.path.join(d, "bf16_float_expected_y.npy"), np.array([1.0, -2.5, 0.10009765625], np.float32))

    for name, data in bad_models(tiny_n.SerializeToString()).items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    npy_fixtures(os.path.join(d, "npy"))
    print("wrote", d)
    hbm = args.hbm or os.path.join(args.hostile_dir, "tiny.hbm")
    write_hostile(args.hostile_dir, hbm if os.path.exists(hbm) else None, tiny_n.SerializeToString())
    print("wrote", args.hostile_dir)


if __name__ == "__main__":
    main()
