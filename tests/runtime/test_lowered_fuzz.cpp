// Random damage to valid lowered models: validate, create and run must report errors, never
// crash or throw (run this binary under a sanitizer to check memory safety too).
#include <random>

#include "tests/runtime/test_lowered_common.h"

using namespace qflow::lowered;
using qflow::Status;
using namespace qflow::lowered::test;
namespace fx = qflow::fx;

namespace {

// A model touching most integer ops and a CPU segment.
Model integer_model() {
  Builder b;
  const Quant q{0.05, 2}, q2{0.1, -3};
  const int32_t x = b.input("x", {1, 2, 6, 6});
  const int32_t xq = b.tensor("xq", ElemType::i8, {1, 2, 6, 6}, q);
  const int32_t w = b.constant_ints("w", ElemType::i8, {4, 1, 3, 3}, std::vector<int64_t>(36, 5));
  const int32_t bias = b.constant_ints("bias", ElemType::i32, {4}, {1, -2, 3, -4});
  const int32_t c = b.tensor("c", ElemType::i8, {1, 4, 3, 3}, q2);
  const int32_t p = b.tensor("p", ElemType::i8, {1, 4, 2, 2}, q2);
  const int32_t r = b.tensor("r", ElemType::i8, {1, 4, 4, 4}, q2);
  const int32_t s = b.tensor("s", ElemType::i8, {1, 4, 4, 4}, q);
  const int32_t t = b.tensor("t", ElemType::i8, {1, 4, 16}, q);
  const int32_t wm = b.constant_ints("wm", ElemType::i8, {16, 5}, std::vector<int64_t>(80, -3));
  const int32_t m = b.tensor("m", ElemType::i8, {1, 4, 5}, q2);
  const int32_t f = b.tensor("f", ElemType::f32, {1, 4, 5});
  const int32_t g = b.output("g", {1, 4, 5});
  const fx::Multiplier mul = make_mult(0.05 * 0.01 / 0.1);
  b.bpu("quantize", {x}, {xq});
  b.bpu("conv2d", {xq, w, bias}, {c},
        {ints("group", {2}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}), ints("multiplier_mantissa", {mul.mantissa}),
         ints("multiplier_shift", {mul.shift}), ints("clamp", {-128, 127})});
  b.bpu("max_pool", {c}, {p}, {ints("kernel", {2, 2}), ints("strides", {1, 1})});
  b.bpu("resize", {p}, {r}, {strings("mode", {"linear"})});
  fx::AddParams ap;
  REQUIRE(fx::make_add_params(qp(ElemType::i8, q2), qp(ElemType::i8, q2), qp(ElemType::i8, q), false, ap).is_ok());
  b.bpu("add", {r, r}, {s},
        {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
         multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)});
  b.bpu("reshape", {s}, {t});
  b.bpu("matmul", {t, wm, -1}, {m},
        {ints("multiplier_mantissa", {mul.mantissa}), ints("multiplier_shift", {mul.shift})});
  b.bpu("dequantize", {m}, {f});
  b.cpu("Softmax", {f}, {g}, {ints("axis", {1})});
  return b.model;
}

Model cpu_model() {
  Builder b;
  const int32_t x = b.input("x", {1, 2, 4, 4});
  const int32_t w = b.constant_f32("w", {2, 1, 3, 3}, std::vector<float>(18, 0.5f));
  const int32_t c = b.tensor("c", ElemType::f32, {1, 2, 4, 4});
  const int32_t r = b.tensor("r", ElemType::f32, {1, 2, 8, 8});
  const int32_t pads = b.constant_ints("pads", ElemType::i64, {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  const int32_t p = b.tensor("p", ElemType::f32, {1, 2, 10, 10});
  const int32_t starts = b.constant_ints("starts", ElemType::i64, {2}, {1, 1});
  const int32_t ends = b.constant_ints("ends", ElemType::i64, {2}, {9, 9});
  const int32_t s = b.tensor("s", ElemType::f32, {1, 2, 8, 8});
  const int32_t shape = b.constant_ints("shape", ElemType::i64, {2}, {2, 64});
  const int32_t rs = b.tensor("rs", ElemType::f32, {2, 64});
  const int32_t gw = b.constant_f32("gw", {3, 64}, std::vector<float>(192, 0.01f));
  const int32_t gm = b.tensor("gm", ElemType::f32, {2, 3});
  const int32_t out = b.output("out", {2, 3});
  b.cpu("Conv", {x, w, -1}, {c}, {ints("group", {2}), ints("pads", {1, 1, 1, 1})});
  b.cpu("Resize", {c, -1, -1, -1}, {r}, {strings("mode", {"linear"})});
  b.cpu("Pad", {r, pads}, {p});
  b.cpu("Slice", {p, starts, ends, -1, -1}, {s});
  b.cpu("Reshape", {s, shape}, {rs});
  b.cpu("Gemm", {rs, gw, -1}, {gm}, {ints("transB", {1})});
  b.cpu("Relu", {gm}, {out});
  return b.model;
}

void mutate(Model& m, std::mt19937& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto small = [&] { return std::uniform_int_distribution<int64_t>(-3, 9)(rng); };
  std::vector<Op*> ops;
  for (Segment& s : m.segments)
    for (Op& o : s.ops) ops.push_back(&o);
  Op& op = *ops[pick(ops.size())];
  Tensor& t = m.tensors[pick(m.tensors.size())];
  switch (pick(10)) {
    case 0:
      if (!op.inputs.empty()) op.inputs[pick(op.inputs.size())] = static_cast<int32_t>(small());
      break;
    case 1:
      if (!t.shape.empty()) t.shape[pick(t.shape.size())] = small();
      break;
    case 2: t.type = static_cast<ElemType>(1 + pick(7)); break;
    case 3:
      if (!op.attributes.empty()) {
        Attribute& a = op.attributes[pick(op.attributes.size())];
        if (!a.ints.empty()) a.ints[pick(a.ints.size())] = pick(2) ? small() : static_cast<int64_t>(rng());
        else if (!a.strings.empty()) a.strings[0] = pick(2) ? "nearest" : "bogus";
      }
      break;
    case 4:
      if (!op.attributes.empty()) op.attributes.erase(op.attributes.begin() + static_cast<std::ptrdiff_t>(pick(op.attributes.size())));
      break;
    case 5:
      if (t.constant && !t.data.empty()) t.data[pick(t.data.size())] = static_cast<uint8_t>(rng());
      break;
    case 6: t.quant.zero_point = static_cast<int32_t>(small() * 40); break;
    case 7: t.shape.push_back(1 + pick(3)); break;
    case 8:
      if (!op.outputs.empty()) op.outputs[0] = static_cast<int32_t>(pick(m.tensors.size()));
      break;
    case 9: t.quant.scale = pick(2) ? 0.0 : 1e-3 * static_cast<double>(pick(1000)); break;
  }
}

}  // namespace

TEST_CASE("randomly damaged lowered models are refused or run, never crash") {
  std::mt19937 rng(2026);
  int refused = 0, ran = 0, failed = 0;
  for (const Model& base : {integer_model(), cpu_model()}) {
    REQUIRE(validate(base).is_ok());
    for (int iter = 0; iter < 1500; ++iter) {
      Model m = base;
      for (int k = 0; k < 1 + iter % 3; ++k) mutate(m, rng);
      auto ex = Executor::create(m);
      if (!ex.has_value()) {
        CHECK(ex.message().find('\n') == std::string::npos);
        ++refused;
        continue;
      }
      std::vector<std::vector<float>> inputs;
      for (const int32_t i : m.inputs) {
        const int64_t n = std::max<int64_t>(0, [&] {
          int64_t c = 1;
          for (const int64_t d : m.tensors[static_cast<size_t>(i)].shape) c *= d;
          return c;
        }());
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
        inputs.push_back(std::move(v));
      }
      std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
      std::vector<std::vector<float>> outputs;
      const Status s = ex->run(spans, outputs);
      if (s.is_ok()) ++ran;
      else {
        ++failed;
        CHECK(s.message().find('\n') == std::string::npos);
      }
    }
  }
  MESSAGE("refused " << refused << ", ran " << ran << ", failed at run " << failed);
  CHECK(refused > 0);
  CHECK(ran > 0);
}
