// Tests of the BPU lowering per op family: the lowered program run by the executor against the
// QDQ model run by the interpreter (ConvTranspose, MatMul of activations, pooling, Resize,
// Concat, Slice, int16 tables, Softmax and LayerNormalization).
#include <doctest/doctest.h>

#include <cstring>

#include "test_bpu_lowering_helpers.h"

namespace qflow {
namespace {

using namespace lowering_test;
using bpu_test::backend_for;

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

TEST_CASE("bpu lowering ops: ConvTranspose with per-channel weights along axis 1") {
  QdqGraph q;
  const double s_in = 0.0517;
  Value* x = q.input("x", {1, 2, 3, 3}, s_in, 4);
  const std::vector<float> ws = {0.0031f, 0.0047f, 0.0023f};
  Value* w = q.weight("w", {2, 3, 2, 2}, int8_ramp(24, 11), ws, 1);
  std::vector<float> bs;
  for (float s : ws) bs.push_back(static_cast<float>(f32(s_in) * s));
  Value* b = q.bias("b", {90, -40, 300}, bs);
  Value* y = q.op("ConvTranspose", "deconv", {x, w, b}, {1, 3, 6, 6}, {Attribute::make_ints("strides", {2, 2})});
  q.output(q.qdq(y, 0.0093, -7));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize conv_transpose2d dequantize");
  const lowered::Op& op = *find_op(lowered, "conv_transpose2d");
  const std::vector<int64_t> mantissa = ints(op, "multiplier_mantissa");
  REQUIRE(mantissa.size() == 3);
  for (std::size_t c = 0; c < 3; ++c) {
    fx::Multiplier m;
    REQUIRE(fx::make_multiplier(f32(s_in) * f32(ws[c]) / f32(0.0093), m).is_ok());
    CHECK(mantissa[c] == m.mantissa);
  }
  CHECK(ints(op, "output_padding") == std::vector<int64_t>{0, 0});
  const std::vector<std::vector<float>> in = {ramp(18, -2.0f, 2.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0093));
}

TEST_CASE("bpu lowering ops: MatMul of two activations") {
  QdqGraph q;
  Value* a = q.input("a", {1, 2, 3, 4}, 0.0213, 3);
  Value* b = q.input("b", {1, 2, 4, 5}, 0.0177, -2);
  Value* y = q.op("MatMul", "mm", {a, b}, {1, 2, 3, 5});
  q.output(q.qdq(y, 0.0119, 1));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize quantize matmul dequantize");
  const lowered::Op& op = *find_op(lowered, "matmul");
  CHECK(op.inputs[2] == -1);
  fx::Multiplier m;
  REQUIRE(fx::make_multiplier(f32(0.0213) * f32(0.0177) / f32(0.0119), m).is_ok());
  CHECK(ints(op, "multiplier_mantissa") == std::vector<int64_t>{m.mantissa});
  const std::vector<std::vector<float>> in = {ramp(24, -2.0f, 2.0f, 3), ramp(40, -2.0f, 2.0f, 4)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0119));
}

TEST_CASE("bpu lowering ops: AveragePool, Resize, Concat and Slice") {
  QdqGraph q(13);
  Value* x = q.input("x", {1, 2, 4, 4}, 0.0517, -3);
  Value* p = q.op("AveragePool", "avg", {x}, {1, 2, 2, 2},
                  {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})});
  Value* sizes = q.constant("sizes", Tensor::from_vector<int64_t>({4}, {1, 2, 4, 4}));
  Value* r = q.op("Resize", "resize", {q.qdq(p, 0.0371, 2), nullptr, nullptr, sizes}, {1, 2, 4, 4},
                  {Attribute::make_string("mode", "nearest"), Attribute::make_string("coordinate_transformation_mode", "asymmetric"),
                   Attribute::make_string("nearest_mode", "floor")});
  Value* c = q.op("Concat", "concat", {x, q.qdq(r, 0.0371, 2)}, {1, 4, 4, 4}, {Attribute::make_int("axis", -3)});
  Value* starts = q.constant("starts", Tensor::from_vector<int64_t>({1}, {1}));
  Value* ends = q.constant("ends", Tensor::from_vector<int64_t>({1}, {100}));
  Value* axes = q.constant("axes", Tensor::from_vector<int64_t>({1}, {-1}));
  Value* s = q.op("Slice", "slice", {q.qdq(c, 0.0613, 0), starts, ends, axes}, {1, 4, 4, 3});
  q.output(q.qdq(s, 0.0613, 0));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize average_pool resize concat slice dequantize");
  CHECK(ints(*find_op(lowered, "concat"), "axis") == std::vector<int64_t>{1});
  const lowered::Op& slice = *find_op(lowered, "slice");
  CHECK(ints(slice, "axes") == std::vector<int64_t>{3});
  CHECK(ints(slice, "starts") == std::vector<int64_t>{1});
  CHECK(ints(slice, "ends") == std::vector<int64_t>{4});
  const std::vector<std::vector<float>> in = {ramp(32, -5.0f, 5.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0613));
}

TEST_CASE("bpu lowering ops: int16 activations: a segmented table, Softmax and LayerNormalization") {
  QdqGraph q(21);
  Value* x = q.input("x", {1, 4, 8}, 0.000153, 0, DType::Int16);
  Value* s = q.op("Sigmoid", "sigmoid", {x}, {1, 4, 8});
  Value* sm = q.op("Softmax", "softmax", {q.qdq(s, 1.0 / 32768, 0, DType::Int16)}, {1, 4, 8},
                   {Attribute::make_int("axis", -1)});
  Value* gamma = q.constant("gamma", Tensor::from_vector<float>({8}, {1.0f, 0.5f, 2.0f, -1.0f, 0.25f, 1.5f, 0.75f, 1.0f}));
  Value* beta = q.constant("beta", Tensor::from_vector<float>({8}, {0.0f, 0.1f, -0.2f, 0.3f, 0.0f, 0.05f, -0.1f, 0.2f}));
  Value* ln = q.op("LayerNormalization", "ln", {q.qdq(sm, 1.0 / 32768, 0, DType::Int16), gamma, beta}, {1, 4, 8},
                   {Attribute::make_int("axis", -1)});
  q.output(q.qdq(ln, 0.000183, 0, DType::Int16));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize lut softmax layernorm dequantize");
  const lowered::Op& lut = *find_op(lowered, "lut");
  CHECK(ints(lut, "segment_bits") == std::vector<int64_t>{7});
  CHECK(lowered.tensors[static_cast<std::size_t>(lut.inputs[1])].shape == std::vector<int64_t>{513});
  CHECK(lowered.tensors[static_cast<std::size_t>(find_op(lowered, "softmax")->inputs[1])].shape ==
        std::vector<int64_t>{fx::kSoftmaxEntries});
  CHECK(lowered.tensors[static_cast<std::size_t>(lowered.outputs[0])].type == lowered::ElemType::f32);
  const std::vector<std::vector<float>> in = {ramp(32, -4.0f, 4.0f)};
  // Tables and the normalization are approximations: a few 16-bit steps.
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.000183), 8.0);
}

TEST_CASE("bpu lowering ops: com.microsoft Gelu (the fuse-gelu output) and HardSwish become tables") {
  QdqGraph q;
  q.model.opset_imports.push_back({"com.microsoft", 1});
  Value* x = q.input("x", {1, 2, 2, 4}, 0.0317, -5);
  Value* g = q.op("Gelu", "gelu", {x}, {1, 2, 2, 4}, {}, "com.microsoft");
  Value* h = q.op("HardSwish", "hswish", {q.qdq(g, 0.0213, -100)}, {1, 2, 2, 4});
  q.output(q.qdq(h, 0.0201, -90));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize lut lut dequantize");
  fx::Lut expected;
  REQUIRE(fx::build_gelu_lut({f32(0.0317), -5, fx::QType::Int8}, {f32(0.0213), -100, fx::QType::Int8}, 0, expected).is_ok());
  const lowered::Op& lut = *find_op(lowered, "lut");
  CHECK(lut.name == "gelu");
  const lowered::Tensor& table = lowered.tensors[static_cast<std::size_t>(lut.inputs[1])];
  REQUIRE(table.data.size() == 256 * 4);
  std::vector<int32_t> entries(256);
  std::memcpy(entries.data(), table.data.data(), table.data.size());
  CHECK(entries == expected.entries);
  const std::vector<std::vector<float>> in = {ramp(16, -4.0f, 4.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0201));
}

TEST_CASE("bpu lowering ops: a float constant operand of Add or Mul is quantized symmetrically") {
  QdqGraph q;
  Value* x = q.input("x", {1, 2, 2, 2}, 0.0317, 7);
  Value* half = q.constant("half", Tensor::scalar<float>(0.5f));
  Value* m = q.op("Mul", "mul", {x, half}, {1, 2, 2, 2});
  Value* bias = q.constant("bias", Tensor::from_vector<float>({1, 2, 1, 1}, {0.75f, -1.25f}));
  Value* a = q.op("Add", "add", {bias, q.qdq(m, 0.0173, -3)}, {1, 2, 2, 2});
  q.output(q.qdq(a, 0.0229, 4));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize mul add dequantize");
  // The scalar is exact: 127 steps of 0.5 / 127.
  const lowered::Op& mul = *find_op(lowered, "mul");
  const lowered::Tensor& c = lowered.tensors[static_cast<std::size_t>(mul.inputs[1])];
  CHECK(c.constant);
  CHECK(c.type == lowered::ElemType::i8);
  REQUIRE(c.data.size() == 1);
  CHECK(static_cast<int8_t>(c.data[0]) == 127);
  CHECK(c.quant.scale == doctest::Approx(0.5 / 127));
  const lowered::Tensor& b = lowered.tensors[static_cast<std::size_t>(find_op(lowered, "add")->inputs[0])];
  CHECK(b.shape == std::vector<int64_t>{1, 2, 1, 1});
  const std::vector<std::vector<float>> in = {ramp(8, -3.0f, 3.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0229));
}

TEST_CASE("bpu lowering ops: bilinear Resize and a MatMul with a constant [K, N] weight") {
  QdqGraph q;
  Value* x = q.input("x", {1, 2, 3, 3}, 0.0317, -9);
  Value* scales = q.constant("scales", Tensor::from_vector<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f}));
  Value* r = q.op("Resize", "resize", {x, nullptr, scales}, {1, 2, 6, 6},
                  {Attribute::make_string("mode", "linear"), Attribute::make_string("coordinate_transformation_mode", "half_pixel")});
  const std::vector<float> ws = {0.0041f, 0.0057f, 0.0033f, 0.0049f};
  Value* w = q.weight("w", {6, 4}, int8_ramp(24, 9), ws, 1);
  Value* y = q.op("MatMul", "mm", {q.qdq(r, 0.0317, -9), w}, {1, 2, 6, 4});
  q.output(q.qdq(y, 0.0087, 2));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize resize matmul dequantize");
  const lowered::Op& mm = *find_op(lowered, "matmul");
  CHECK(ints(mm, "b_transposed") == std::vector<int64_t>{0});
  CHECK(ints(mm, "multiplier_mantissa").size() == 4);
  CHECK(mm.inputs[2] == -1);
  const std::vector<std::vector<float>> in = {ramp(18, -3.0f, 3.0f)};
  // The ramp puts many resized values exactly halfway between two int8 steps; the reference
  // bilinear rounds in float32 as ONNX Runtime does, the fixed-point one exactly, so such a
  // tie may go either way (1 LSB before the MatMul, up to 2 after it).
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(2 * 0.0087));
}

TEST_CASE("bpu lowering ops: Softmax on a platform without it runs on the CPU between dequantize and quantize") {
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 2, 8}, 0.0517);
  Value* r = q.op("Relu", "relu", {x}, {1, 1, 2, 8});
  Value* sm = q.op("Softmax", "softmax", {q.qdq(r, 0.0517)}, {1, 1, 2, 8}, {Attribute::make_int("axis", -1)});
  Value* r2 = q.op("Relu", "relu2", {q.qdq(sm, 1.0 / 256, -128)}, {1, 1, 2, 8});
  q.output(q.qdq(r2, 1.0 / 256, -128));
  const lowered::Model lowered = lower(q.model, backend_for("bernoulli2"));
  CHECK(op_list(lowered) == "bpu: quantize requantize | cpu: dequantize cpu.Softmax | bpu: quantize requantize dequantize");
  const std::vector<std::vector<float>> in = {ramp(16, -3.0f, 3.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(1.0 / 256));
}

}  // namespace
}  // namespace qflow
