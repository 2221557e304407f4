// Tests of the BPU lowering: op lists and integer parameters, the executor against the QDQ
// model run by the interpreter, CPU fallback segments, and the errors.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>

#include "plugins/backends/bpu/bc_codec.h"
#include "qflow/runtime/hbm_codec.h"
#include "test_bpu_lowering_helpers.h"

namespace qflow {
namespace {

using namespace lowering_test;
using bpu_test::backend_for;

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// x -> Conv 3x3 (3 channels, per-channel weights, bias) -> y -> Relu -> r (the output).
struct ConvRelu {
  QdqGraph q;
  // Scales away from round numbers keep exact rounding ties (half away from zero on the
  // BPU, half to even in QuantizeLinear) rare; s_y / 2 < s_r keeps the fused result within
  // one output step of the QDQ model's double rounding.
  std::vector<float> w_scale = {0.00107f, 0.00213f, 0.00151f};
  double s_in = 0.0517, s_y = 0.0419, s_r = 0.0307;
  int64_t zp_in = 3, zp_r = -100;

  explicit ConvRelu(int64_t kernel = 3) {
    Value* x = q.input("x", {1, 2, 5, 5}, s_in, zp_in);
    const int64_t pad = kernel / 2;
    Value* w = q.weight("w", {3, 2, kernel, kernel}, int8_ramp(static_cast<std::size_t>(3 * 2 * kernel * kernel)), w_scale, 0);
    std::vector<float> b_scale;
    for (float s : w_scale) b_scale.push_back(static_cast<float>(f32(s_in) * s));
    Value* b = q.bias("b", {120, -340, 55}, b_scale);
    Value* y = q.op("Conv", "conv", {x, w, b}, {1, 3, 5, 5},
                    {Attribute::make_ints("pads", {pad, pad, pad, pad}), Attribute::make_ints("kernel_shape", {kernel, kernel})});
    Value* r = q.op("Relu", "relu", {q.qdq(y, s_y)}, {1, 3, 5, 5});
    q.output(q.qdq(r, s_r, zp_r));
  }
};

TEST_CASE("bpu lowering: Conv + Relu fuse into one conv2d with per-channel multipliers and the Relu clamp") {
  ConvRelu m;
  const lowered::Model lowered = lower(m.q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize conv2d dequantize");
  CHECK(lowered.platform == "nash");
  const lowered::Op& conv = *find_op(lowered, "conv2d");
  CHECK(conv.name == "conv+relu");
  const std::vector<int64_t> mantissa = ints(conv, "multiplier_mantissa"), shift = ints(conv, "multiplier_shift");
  REQUIRE(mantissa.size() == 3);
  for (std::size_t c = 0; c < 3; ++c) {
    fx::Multiplier expected;
    REQUIRE(fx::make_multiplier(f32(m.s_in) * f32(m.w_scale[c]) / f32(m.s_r), expected).is_ok());
    CHECK(mantissa[c] == expected.mantissa);
    CHECK(shift[c] == expected.shift);
  }
  // Relu's lower bound is the output zero point; the upper one is the top of the skipped
  // intermediate's range, 127 * s_y, in output units.
  const fx::QParams r{f32(m.s_r), static_cast<int32_t>(m.zp_r), fx::QType::Int8};
  CHECK(ints(conv, "clamp") == std::vector<int64_t>{m.zp_r, fx::quantize(127 * f32(m.s_y), r)});
  CHECK(ints(conv, "pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(ints(conv, "group") == std::vector<int64_t>{1});
  // Inputs: the quantized x, the int8 weight, the int32 bias; the output is r's tensor.
  const lowered::Tensor& w = lowered.tensors[static_cast<std::size_t>(conv.inputs[1])];
  CHECK(w.type == lowered::ElemType::i8);
  CHECK(w.constant);
  CHECK(lowered.tensors[static_cast<std::size_t>(conv.inputs[2])].type == lowered::ElemType::i32);
  const lowered::Tensor& y = lowered.tensors[static_cast<std::size_t>(conv.outputs[0])];
  CHECK(y.quant.scale == f32(m.s_r));
  CHECK(y.quant.zero_point == m.zp_r);
  // Model I/O: f32 tensors with the graph's names.
  CHECK(lowered.tensors[static_cast<std::size_t>(lowered.inputs[0])].name == "x");
  CHECK(lowered.tensors[static_cast<std::size_t>(lowered.outputs[0])].name == "relu_out_dequantized");
  CHECK(lowered.tensors[static_cast<std::size_t>(lowered.outputs[0])].type == lowered::ElemType::f32);

  const std::vector<std::vector<float>> in = {ramp(50, -1.0f, 1.0f)};
  check_close(run_lowered(lowered, in), run_reference(m.q.model, in), f32(m.s_r));
}

TEST_CASE("bpu lowering: without activation fusion the Relu is a requantize of its own, rounding twice like the PTQ model") {
  ConvRelu m;
  LoweringOptions options;
  options.fuse_activations = false;
  auto lowered = lower_ptq_model(m.q.model, backend_for("nash"), nullptr, options);
  REQUIRE_MESSAGE(lowered.has_value(), lowered.status().message());
  CHECK(op_list(lowered.value()) == "bpu: quantize conv2d requantize dequantize");
  CHECK(ints(*find_op(lowered.value(), "conv2d"), "clamp") == std::vector<int64_t>{-128, 127});
  CHECK(ints(*find_op(lowered.value(), "requantize"), "clamp") == std::vector<int64_t>{m.zp_r, 127});
  const std::vector<std::vector<float>> in = {ramp(50, -1.0f, 1.0f)};
  check_close(run_lowered(lowered.value(), in), run_reference(m.q.model, in), f32(m.s_r));
}

TEST_CASE("bpu lowering: a Clip(0, 6) after a Conv fuses with its bounds quantized") {
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 4, 4}, 0.1031);
  Value* w = q.weight("w", {2, 1, 1, 1}, {100, -90}, {0.0203f, 0.0307f}, 0);
  Value* y = q.op("Conv", "conv", {x, w}, {1, 2, 4, 4});
  Value* lo = q.constant("lo", Tensor::scalar<float>(0.0f));
  Value* hi = q.constant("hi", Tensor::scalar<float>(6.0f));
  Value* c = q.op("Clip", "clip", {q.qdq(y, 0.0711), lo, hi}, {1, 2, 4, 4});
  q.output(q.qdq(c, 0.0397, -128));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize conv2d dequantize");
  // Q(0) = -128 (the output zero point), Q(6) = round(6 / 0.0397) - 128 = 23.
  CHECK(ints(*find_op(lowered, "conv2d"), "clamp") == std::vector<int64_t>{-128, 23});
  const std::vector<std::vector<float>> in = {ramp(16, -3.0f, 3.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0397));
}

// x -> Conv 1x1 -> y; Add(x, y) -> a; GlobalAveragePool -> p; Flatten -> f; Gemm -> logits.
QdqGraph residual_model() {
  QdqGraph q;
  const double s_x = 0.05;
  Value* x = q.input("x", {1, 4, 4, 4}, s_x, -5);
  std::vector<float> ws = {0.01f, 0.012f, 0.009f, 0.02f};
  Value* w = q.weight("w", {4, 4, 1, 1}, int8_ramp(16, 3), ws, 0);
  Value* y = q.op("Conv", "conv", {x, w}, {1, 4, 4, 4});
  Value* a = q.op("Add", "add", {x, q.qdq(y, 0.03, 2)}, {1, 4, 4, 4});
  Value* p = q.op("GlobalAveragePool", "gap", {q.qdq(a, 0.06, -3)}, {1, 4, 1, 1});
  Value* f = q.op("Flatten", "flatten", {q.qdq(p, 0.04, 1)}, {1, 4});
  std::vector<float> gs = {0.02f, 0.01f, 0.015f};
  Value* gw = q.weight("gw", {3, 4}, int8_ramp(12, 5), gs, 0);
  std::vector<float> bs;
  for (float s : gs) bs.push_back(static_cast<float>(f32(0.04) * s));
  Value* gb = q.bias("gb", {500, -200, 0}, bs);
  Value* logits = q.op("Gemm", "gemm", {q.qdq(f, 0.04, 1), gw, gb}, {1, 3}, {Attribute::make_int("transB", 1)});
  q.output(q.qdq(logits, 0.05));
  return q;
}

TEST_CASE("bpu lowering: residual Add, pooling, Flatten and Gemm lower to integer ops that match the QDQ model") {
  QdqGraph q = residual_model();
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize conv2d add global_average_pool reshape matmul dequantize");
  const lowered::Op& add = *find_op(lowered, "add");
  fx::AddParams p;
  REQUIRE(fx::make_add_params({f32(0.05), -5, fx::QType::Int8}, {f32(0.03), 2, fx::QType::Int8}, {f32(0.06), -3, fx::QType::Int8},
                              false, p)
              .is_ok());
  CHECK(ints(add, "left_shift") == std::vector<int64_t>{p.left_shift});
  CHECK(ints(add, "a_multiplier") == std::vector<int64_t>{p.a_multiplier.mantissa, p.a_multiplier.shift});
  CHECK(ints(add, "b_multiplier") == std::vector<int64_t>{p.b_multiplier.mantissa, p.b_multiplier.shift});
  CHECK(ints(add, "output_multiplier") == std::vector<int64_t>{p.output_multiplier.mantissa, p.output_multiplier.shift});
  CHECK(ints(add, "clamp") == std::vector<int64_t>{-128, 127});
  const lowered::Op& mm = *find_op(lowered, "matmul");
  CHECK(ints(mm, "b_transposed") == std::vector<int64_t>{1});
  CHECK(ints(mm, "multiplier_mantissa").size() == 3);
  CHECK(mm.inputs[2] >= 0);

  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const std::vector<std::vector<float>> in = {ramp(64, -6.0f, 6.0f, seed)};
    check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.05));
  }
}

TEST_CASE("bpu lowering: the same model lowers to the same program and the same .bc bytes") {
  QdqGraph q = residual_model();
  const lowered::Model a = lower(q.model, backend_for("nash"));
  const lowered::Model b = lower(q.model, backend_for("nash"));
  CHECK(a == b);
  auto bytes_a = encode_bc(a), bytes_b = encode_bc(b);
  REQUIRE(bytes_a.has_value());
  REQUIRE(bytes_b.has_value());
  CHECK(bytes_a.value() == bytes_b.value());
}

TEST_CASE("bpu lowering: a Conv the platform cannot run becomes a cpu.Conv segment between dequantize and quantize") {
  // bernoulli2 runs Conv kernels up to 7x7: the 9x9 one falls back.
  QdqGraph q = big_kernel_model();
  LoweringReport report;
  auto lowered_or = lower_ptq_model(q.model, backend_for("bernoulli2"), &report);
  REQUIRE_MESSAGE(lowered_or.has_value(), lowered_or.status().message());
  const lowered::Model& lowered = lowered_or.value();
  CHECK(op_list(lowered) == "bpu: quantize conv2d | cpu: dequantize cpu.Conv | bpu: quantize conv2d dequantize");
  REQUIRE(lowered.segments.size() == 3);
  CHECK(lowered.segments[1].kind == lowered::SegmentKind::cpu);
  // The CPU Conv reads the weight dequantized to a float constant, with its attributes.
  const lowered::Op& cpu = *find_op(lowered, "cpu.Conv");
  CHECK(cpu.name == "big");
  const lowered::Tensor& w = lowered.tensors[static_cast<std::size_t>(cpu.inputs[1])];
  CHECK(w.type == lowered::ElemType::f32);
  CHECK(w.constant);
  CHECK(w.data.size() == 324 * 4);
  CHECK(ints(cpu, "pads") == std::vector<int64_t>{4, 4, 4, 4});
  // The last conv has one per-tensor weight scale: one multiplier.
  bool found = false;
  for (const NodeCapability& n : report.nodes)
    if (n.node == "big") {
      found = true;
      CHECK_FALSE(n.supported);
      CHECK(n.reason.find("kernel 9x9") != std::string::npos);
    }
  CHECK(found);
  const std::vector<std::vector<float>> in = {ramp(144, -1.0f, 1.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0973));
}

TEST_CASE("bpu lowering: a node the platform accepts but the lowering cannot express runs on the CPU with the reason") {
  // nash lists Div; the lowering has no integer Div.
  QdqGraph q;
  Value* a = q.input("a", {1, 2, 2, 2}, 0.1);
  Value* b = q.input("b", {1, 2, 2, 2}, 0.1, 0, DType::Int8);
  Value* d = q.op("Div", "div", {a, b}, {1, 2, 2, 2});
  Value* r = q.op("Relu", "relu", {q.qdq(d, 0.5)}, {1, 2, 2, 2});
  q.output(q.qdq(r, 0.5));
  LoweringReport report;
  auto lowered = lower_ptq_model(q.model, backend_for("nash"), &report);
  REQUIRE_MESSAGE(lowered.has_value(), lowered.status().message());
  CHECK(op_list(lowered.value()) == "cpu: cpu.Div | bpu: quantize requantize dequantize");
  bool found = false;
  for (const NodeCapability& n : report.nodes)
    if (n.node == "div") {
      found = true;
      CHECK_FALSE(n.supported);
      CHECK(n.reason == "no integer lowering for Div");
    }
  CHECK(found);
  LoweringOptions options;
  options.run_on_bpu = {"div"};
  auto forced = lower_ptq_model(q.model, backend_for("nash"), nullptr, options);
  REQUIRE_FALSE(forced.has_value());
  CHECK(forced.status().message() == "run-on-bpu: node 'div' cannot run on nash: no integer lowering for Div");
}

TEST_CASE("bpu lowering: segments follow the data, not the position of a subgraph's first node") {
  // relu (BPU) comes first, sqrt (no integer lowering: CPU) second, and the Add joining both
  // shares relu's subgraph: that subgraph reads sqrt's result, so the CPU segment runs first.
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 2, 4}, 0.0317);
  Value* a = q.op("Relu", "relu", {x}, {1, 1, 2, 4});
  Value* c = q.op("Sqrt", "sqrt", {x}, {1, 1, 2, 4});
  Value* sum = q.op("Add", "add", {q.qdq(a, 0.0317), q.qdq(c, 0.0119, -128)}, {1, 1, 2, 4});
  q.output(q.qdq(sum, 0.0271, -128));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "cpu: cpu.Sqrt | bpu: quantize requantize quantize add dequantize");
  const std::vector<std::vector<float>> in = {ramp(8, 0.0f, 3.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.0271));
}

TEST_CASE("bpu lowering: run-on-cpu moves a node to a CPU segment; its output is the float graph output") {
  ConvRelu m;
  const lowered::Model lowered = lower(m.q.model, backend_for("nash", {{"relu"}, {}}));
  CHECK(op_list(lowered) == "bpu: quantize conv2d | cpu: dequantize cpu.Relu");
  // No fusion across segments: the conv writes y at its own quantization.
  CHECK(ints(*find_op(lowered, "conv2d"), "clamp") == std::vector<int64_t>{-128, 127});
  CHECK(lowered.tensors[static_cast<std::size_t>(lowered.outputs[0])].name == "relu_out_dequantized");
  const std::vector<std::vector<float>> in = {ramp(50, -1.0f, 1.0f)};
  check_close(run_lowered(lowered, in), run_reference(m.q.model, in), f32(m.s_r));
}

TEST_CASE("bpu lowering: Sigmoid becomes a 256-entry table and Mul a rescaling multiply") {
  QdqGraph q;
  Value* x = q.input("x", {1, 2, 3, 3}, 0.04, 10);
  Value* s = q.op("Sigmoid", "sigmoid", {x}, {1, 2, 3, 3});
  Value* m = q.op("Mul", "mul", {x, q.qdq(s, 1.0 / 256, -128)}, {1, 2, 3, 3});
  q.output(q.qdq(m, 0.03, 5));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize lut mul dequantize");
  const lowered::Op& lut = *find_op(lowered, "lut");
  CHECK(ints(lut, "segment_bits") == std::vector<int64_t>{0});
  fx::Lut expected;
  REQUIRE(fx::build_sigmoid_lut({f32(0.04), 10, fx::QType::Int8}, {f32(1.0 / 256), -128, fx::QType::Int8}, 0, expected).is_ok());
  const lowered::Tensor& table = lowered.tensors[static_cast<std::size_t>(lut.inputs[1])];
  REQUIRE(table.data.size() == 256 * 4);
  std::vector<int32_t> entries(256);
  std::memcpy(entries.data(), table.data.data(), table.data.size());
  CHECK(entries == expected.entries);
  fx::MulParams mp;
  REQUIRE(fx::make_mul_params({f32(0.04), 10, fx::QType::Int8}, {f32(1.0 / 256), -128, fx::QType::Int8}, {f32(0.03), 5, fx::QType::Int8}, mp).is_ok());
  CHECK(ints(*find_op(lowered, "mul"), "multiplier") == std::vector<int64_t>{mp.multiplier.mantissa, mp.multiplier.shift});
  const std::vector<std::vector<float>> in = {ramp(18, -5.0f, 5.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.03));
}

TEST_CASE("bpu lowering: data movement keeps the input scale and adds a requantize when the output's differs") {
  QdqGraph q;
  Value* x = q.input("x", {1, 2, 4, 4}, 0.0517);
  Value* p = q.op("MaxPool", "pool", {x}, {1, 2, 2, 2},
                  {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})});
  Value* shape = q.constant("shape", Tensor::from_vector<int64_t>({2}, {1, 8}));
  Value* r = q.op("Reshape", "reshape", {q.qdq(p, 0.1), shape}, {1, 8});
  Value* t = q.op("Transpose", "transpose", {q.qdq(r, 0.1)}, {8, 1}, {Attribute::make_ints("perm", {1, 0})});
  q.output(q.qdq(t, 0.1));
  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  CHECK(op_list(lowered) == "bpu: quantize max_pool requantize reshape transpose dequantize");
  const lowered::Op& requant = *find_op(lowered, "requantize");
  fx::Multiplier half;
  REQUIRE(fx::make_multiplier(f32(0.0517) / f32(0.1), half).is_ok());
  CHECK(ints(requant, "multiplier") == std::vector<int64_t>{half.mantissa, half.shift});
  const std::vector<std::vector<float>> in = {ramp(32, -6.0f, 6.0f)};
  check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.1));
}

TEST_CASE("bpu lowering: the float and the calibrated model are errors; float nodes of a PTQ model run on the CPU") {
  SUBCASE("no weight quantized: the calibrated model") {
    QdqGraph q;
    Value* x = q.input("x", {1, 1, 4, 4}, 0.1);
    Value* w = q.constant("w", Tensor(DType::Float32, {1, 1, 1, 1}));
    q.output(q.qdq(q.op("Conv", "c", {x, w}, {1, 1, 4, 4}), 0.1));
    CHECK(lower_error(q.model, backend_for("nash")) ==
          "lowering needs the PTQ model (lowering_test_ptq_model.onnx): Conv 'c' weight 'w' is not quantized, nor is "
          "any other weight");
  }
  SUBCASE("nothing quantized: the float model") {
    QdqGraph q;
    Value* x = q.float_input("x", {1, 1, 4, 4});
    q.output(q.op("Relu", "relu", {x}, {1, 1, 4, 4}));
    CHECK(lower_error(q.model, backend_for("nash")) ==
          "lowering needs the PTQ model (lowering_test_ptq_model.onnx): the model has no "
          "QuantizeLinear/DequantizeLinear (a float model)");
  }
  SUBCASE("a float node whose output a quantized node reads runs on the CPU") {
    // As the precision search leaves a node it moved to the CPU: float weight, float input
    // straight from the graph input, the output quantized for the next (quantized) Conv.
    QdqGraph q;
    Value* x = q.float_input("x", {1, 1, 4, 4});
    Tensor weight(DType::Float32, {1, 1, 1, 1});
    weight.data<float>()[0] = 0.5f;
    Value* c1 = q.op("Conv", "c1", {x, q.constant("w1", weight)}, {1, 1, 4, 4});
    Value* c2 = q.op("Conv", "c2", {q.qdq(c1, 0.05), q.weight("w2", {1, 1, 1, 1}, {64}, {0.0078125f}, 0)}, {1, 1, 4, 4});
    q.output(q.qdq(c2, 0.05));
    const lowered::Model lowered = lower(q.model, backend_for("nash"));
    CHECK(op_list(lowered) == "cpu: cpu.Conv | bpu: quantize conv2d dequantize");
    const std::vector<std::vector<float>> in = {ramp(16, -1.0f, 1.0f)};
    check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.05));
  }
  SUBCASE("a float node on purpose (quantize = false) is no error: it runs on the CPU") {
    QdqGraph q;
    Value* x = q.input("x", {1, 1, 4, 4}, 0.1);
    Tensor weight(DType::Float32, {1, 1, 1, 1});
    weight.data<float>()[0] = 0.5f;
    Value* w = q.constant("w", weight);
    q.output(q.op("Conv", "c", {x, w}, {1, 1, 4, 4}));
    const lowered::Model lowered = lower(q.model, backend_for("nash"));
    CHECK(op_list(lowered) == "cpu: cpu.Conv");
    // A second float node reading the first one's float output: one CPU segment.
    QdqGraph chain;
    Value* cx = chain.input("x", {1, 1, 4, 4}, 0.1);
    Value* c1 = chain.op("Conv", "c1", {cx, chain.constant("w1", weight)}, {1, 1, 4, 4});
    chain.output(chain.op("Conv", "c2", {c1, chain.constant("w2", weight)}, {1, 1, 4, 4}));
    CHECK(op_list(lower(chain.model, backend_for("nash"))) == "cpu: cpu.Conv cpu.Conv");
    // The float segment reads x as given, the reference its int8 rounding: one step apart.
    const std::vector<std::vector<float>> in = {ramp(16, -1.0f, 1.0f)};
    check_close(run_lowered(lowered, in), run_reference(q.model, in), f32(0.1));
  }
}

TEST_CASE("bpu lowering: a value without a static shape is an error naming it and its shape") {
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 4, 4}, 0.1);
  ValueType dynamic;
  dynamic.dtype = DType::Float32;
  dynamic.shape = std::vector<Dim>{Dim{std::nullopt, "batch", ""}, Dim{1, "", ""}, Dim{4, "", ""}, Dim{4, "", ""}};
  q.g.inputs[0]->type = dynamic;
  q.output(q.qdq(q.op("Relu", "relu", {x}, {1, 1, 4, 4}), 0.1));
  CHECK(lower_error(q.model, backend_for("nash")) ==
        "lowering needs static shapes: value 'x' has shape [batch, 1, 4, 4] (give the import stage input-shape and infer-shapes)");
}

TEST_CASE("bpu lowering: a CPU op the runtime has no kernel for is an error") {
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 2, 2}, 0.1);
  q.output(q.qdq(q.op("Foo", "foo", {x}, {1, 1, 2, 2}), 0.1));
  const std::string message = lower_error(q.model, backend_for("nash"));
  CHECK(message.rfind("CPU node 'foo' (Foo): the runtime has no float kernel for Foo", 0) == 0);
}

TEST_CASE("bpu lowering: an LSTM runs as cpu.LSTM with its constants, int32 lengths and an absent Y") {
  // Bidirectional over 3 steps, batch 2, 4 inputs, 3 hidden units; only Y_h and Y_c are read.
  // X is a float input, so that the CPU segment and the interpreter see the same values.
  QdqGraph q(14);
  const int64_t hidden = 3;
  Value* x = q.float_input("x", {3, 2, 4});
  Value* w = q.constant("w", Tensor::from_vector<float>({2, 4 * hidden, 4}, ramp(96, -0.6f, 0.6f, 2)));
  Value* r = q.constant("r", Tensor::from_vector<float>({2, 4 * hidden, hidden}, ramp(72, -0.6f, 0.6f, 3)));
  Value* b = q.constant("b", Tensor::from_vector<float>({2, 8 * hidden}, ramp(48, -0.3f, 0.3f, 4)));
  Value* lens = q.constant("lens", Tensor::from_vector<int32_t>({2}, {3, 2}));
  Value* h0 = q.constant("h0", Tensor::from_vector<float>({2, 2, hidden}, ramp(12, -0.5f, 0.5f, 5)));
  Value* c0 = q.constant("c0", Tensor::from_vector<float>({2, 2, hidden}, ramp(12, -0.5f, 0.5f, 6)));
  Value* y_h = q.g.get_or_create_value("y_h");
  Value* y_c = q.g.get_or_create_value("y_c");
  bpu_test::set_shape(y_h, {2, 2, hidden});
  bpu_test::set_shape(y_c, {2, 2, hidden});
  Node* node = q.g.add_node("LSTM", {x, w, r, b, lens, h0, c0}, {nullptr, y_h, y_c}, "lstm");
  node->set_attribute(Attribute::make_int("hidden_size", hidden));
  node->set_attribute(Attribute::make_string("direction", "bidirectional"));
  node->set_attribute(Attribute::make_float("clip", 0.9f));
  q.output(q.qdq(y_h, 0.0079));
  q.output(y_c);

  const lowered::Model lowered = lower(q.model, backend_for("nash"));
  // The CPU segment computes in float: Y_h's Q/DQ is left out (docs/lowered-model.md).
  CHECK(op_list(lowered) == "cpu: cpu.LSTM");
  const lowered::Op* lstm = find_op(lowered, "cpu.LSTM");
  REQUIRE(lstm != nullptr);
  CHECK(lstm->outputs.size() == 3);
  CHECK(lstm->outputs[0] == -1);
  CHECK(lowered.tensors[static_cast<std::size_t>(lstm->inputs[4])].type == lowered::ElemType::i64);
  const std::vector<std::vector<float>> in = {ramp(24, -1.0f, 1.0f)};
  const std::vector<std::vector<float>> got = run_lowered(lowered, in), want = run_reference(q.model, in);
  REQUIRE(got.size() == 2);
  check_close({got[0]}, {want[0]}, 0.0079 / 2);  // Y_h, which the PTQ model rounds
  check_close({got[1]}, {want[1]}, 1e-6);        // Y_c

  // The absent output survives both file formats.
  auto bc = encode_bc(lowered);
  REQUIRE_MESSAGE(bc.has_value(), bc.status().message());
  auto from_bc = decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bc->data()), bc->size()));
  REQUIRE_MESSAGE(from_bc.has_value(), from_bc.status().message());
  CHECK(from_bc.value() == lowered);
  auto hbm = lowered::encode_hbm(lowered, "qflow test");
  REQUIRE_MESSAGE(hbm.has_value(), hbm.message());
  auto from_hbm = lowered::decode_hbm(*hbm);
  REQUIRE_MESSAGE(from_hbm.has_value(), from_hbm.message());
  CHECK(*from_hbm == lowered);
}

TEST_CASE("bpu lowering: power-of-two platforms shift only") {
  bpu_test::TempDir dir("lowering_pot");
  dir.write("pot.toml", bpu_test::platform_header("pot") + "power-of-two-scales = true\n[ops]\nConv = {}\nRelu = {}\n");
  auto platform = load_bpu_platform(dir.path.string(), "pot");
  REQUIRE_MESSAGE(platform.has_value(), platform.status().message());
  auto model = [](double s_in) {
    QdqGraph q;
    Value* x = q.input("x", {1, 1, 3, 3}, s_in);
    Value* y = q.op("Conv", "conv", {x, q.weight("w", {2, 1, 1, 1}, {64, -32}, {0.0078125f, 0.015625f}, 0)}, {1, 2, 3, 3});
    q.output(q.qdq(y, 0.125));
    return q;
  };
  SUBCASE("power-of-two scales: each multiplier is a pure shift") {
    QdqGraph q = model(0.25);
    const lowered::Model lowered = lower(q.model, BpuBackend(platform.value()));
    CHECK(op_list(lowered) == "bpu: quantize conv2d dequantize");
    for (int64_t m : ints(*find_op(lowered, "conv2d"), "multiplier_mantissa")) CHECK(m == (int64_t{1} << 30));
    const std::vector<std::vector<float>> in = {ramp(9, -8.0f, 8.0f)};
    check_close(run_lowered(lowered, in), run_reference(q.model, in), 0.125);
  }
  SUBCASE("a scale that is not a power of two, forced onto the BPU, is an error naming the node") {
    QdqGraph q = model(0.3);
    const std::string message = lower_error(q.model, BpuBackend(platform.value(), {{}, {"conv"}}));
    CHECK(message.find("node 'conv'") != std::string::npos);
    CHECK(message.find("power of two") != std::string::npos);
  }
  SUBCASE("left to the checks, the node runs on the CPU") {
    QdqGraph q = model(0.3);
    CHECK(op_list(lower(q.model, BpuBackend(platform.value()))) == "cpu: cpu.Conv");
  }
}

}  // namespace
}  // namespace qflow
