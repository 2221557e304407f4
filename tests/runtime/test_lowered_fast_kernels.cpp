// Whole lowered models on the fast kernels against the reference kernels: random CNN-like
// models (dense, depthwise and pointwise conv2d, a gemm head) must give bit-identical outputs,
// and the kernel choice (option, QFLOW_RT_KERNELS, the QFLOW_ISA cap) must be honoured.
#include <cstdlib>
#include <random>

#include "fixed_point/fast_kernels.h"
#include "qflow/runtime/isa_cap.h"
#include "tests/runtime/test_lowered_common.h"

using namespace qflow::lowered;
using qflow::Status;
using namespace qflow::lowered::test;
namespace fx = qflow::fx;

namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

std::vector<int64_t> random_weights(std::mt19937& rng, size_t n) {
  std::vector<int64_t> w(n);
  for (auto& v : w) v = pick(rng, -128, 127);
  return w;
}

ElemType random_type(std::mt19937& rng) { return rng() % 2 ? ElemType::i8 : ElemType::u8; }

Quant random_quant(std::mt19937& rng, ElemType t) {
  return Quant{0.02 + 0.01 * static_cast<double>(rng() % 5), static_cast<int32_t>(t == ElemType::u8 ? pick(rng, 0, 255) : pick(rng, -128, 127))};
}

// quantize -> conv -> depthwise conv -> pointwise conv -> mul and add of constant scalars ->
// reshape -> gemm -> dequantize, random sizes, strides, pads, dilations, zero points,
// per-channel multipliers and clamps.
Model random_model(std::mt19937& rng, std::vector<int64_t>& input_shape) {
  Builder b;
  const int64_t n = pick(rng, 1, 2), c = pick(rng, 1, 4), h = pick(rng, 5, 14), w = pick(rng, 5, 14);
  input_shape = {n, c, h, w};
  const int32_t x = b.input("x", input_shape);
  ElemType t = random_type(rng);
  Quant q = random_quant(rng, t);
  int32_t cur = b.tensor("xq", t, input_shape, q);
  b.bpu("quantize", {x}, {cur});
  std::vector<int64_t> shape = input_shape;
  for (int layer = 0; layer < 3; ++layer) {
    const int64_t cin = shape[1];
    const bool depthwise = layer == 1;
    const int64_t group = depthwise ? cin : 1;
    const int64_t cout = depthwise ? cin : pick(rng, 1, 12);
    const int64_t k = layer == 2 ? 1 : pick(rng, 1, 3) * 2 - 1;
    const int64_t stride = layer == 2 ? 1 : pick(rng, 1, 2), dil = layer == 0 ? pick(rng, 1, 2) : 1;
    const int64_t pad = layer == 2 ? 0 : pick(rng, 0, k / 2 + 1);
    const int64_t oh = (shape[2] + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    const int64_t ow = (shape[3] + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    if (oh < 1 || ow < 1) break;
    const int64_t cg = cin / group;
    const int32_t wt = b.constant_ints("w" + std::to_string(layer), ElemType::i8, {cout, cg, k, k},
                                       random_weights(rng, static_cast<size_t>(cout * cg * k * k)), Quant{0.01, 0});
    std::vector<int64_t> bias(static_cast<size_t>(cout));
    for (auto& v : bias) v = pick(rng, -3000, 3000);
    const int32_t bt = b.constant_ints("b" + std::to_string(layer), ElemType::i32, {cout}, bias);
    std::vector<int64_t> mm, ms;
    for (int64_t i = 0; i < cout; ++i) {
      const fx::Multiplier m = make_mult(q.scale * 0.01 / 0.05 * (1.0 + 0.3 * static_cast<double>(i % 3)));
      mm.push_back(m.mantissa);
      ms.push_back(m.shift);
    }
    const ElemType yt = random_type(rng);
    const Quant yq = random_quant(rng, yt);
    const std::vector<int64_t> ys{shape[0], cout, oh, ow};
    const int32_t y = b.tensor("y" + std::to_string(layer), yt, ys, yq);
    std::vector<Attribute> attrs{ints("group", {group}), ints("strides", {stride, stride}), ints("pads", {pad, pad, pad, pad}),
                                 ints("dilations", {dil, dil}), ints("multiplier_mantissa", mm), ints("multiplier_shift", ms)};
    if (rng() % 2) attrs.push_back(ints("clamp", {yq.zero_point, yt == ElemType::u8 ? 255 : 127}));  // a fused Relu
    b.bpu("conv2d", {cur, wt, bt}, {y}, attrs);
    cur = y;
    shape = ys;
    t = yt;
    q = yq;
  }
  // A learnable affine block: the activation times a constant scalar, then plus (or minus) one,
  // either operand first (the fast kernels turn each into a table over the 8-bit values).
  for (const std::string op : {"mul", rng() % 2 ? "add" : "sub"}) {
    const ElemType ct = random_type(rng), yt = random_type(rng);
    const Quant cq = random_quant(rng, ct), yq = random_quant(rng, yt);
    const int32_t scalar = b.constant_ints(op + "_scalar", ct, rng() % 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1, 1, 1},
                                           {ct == ElemType::u8 ? pick(rng, 0, 255) : pick(rng, -128, 127)}, cq);
    const int32_t y = b.tensor(op + "_out", yt, shape, yq);
    const bool scalar_first = rng() % 2;
    const fx::QParams qa = scalar_first ? qp(ct, cq) : qp(t, q), qb = scalar_first ? qp(t, q) : qp(ct, cq);
    std::vector<Attribute> attrs;
    if (op == "mul") {
      fx::MulParams mp;
      REQUIRE(fx::make_mul_params(qa, qb, qp(yt, yq), mp).is_ok());
      attrs.push_back(multiplier("multiplier", mp.multiplier));
    } else {
      fx::AddParams ap;
      REQUIRE(fx::make_add_params(qa, qb, qp(yt, yq), op == "sub", ap).is_ok());
      attrs = {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
               multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)};
    }
    b.bpu(op, scalar_first ? std::vector<int32_t>{scalar, cur} : std::vector<int32_t>{cur, scalar}, {y}, attrs);
    cur = y;
    t = yt;
    q = yq;
  }
  const int64_t features = shape[1] * shape[2] * shape[3];
  const int32_t flat = b.tensor("flat", t, {shape[0], features}, q);
  b.bpu("reshape", {cur}, {flat});
  const int64_t classes = pick(rng, 1, 13);
  const bool transposed = rng() % 2;
  const int32_t wm = b.constant_ints("wm", ElemType::i8, transposed ? std::vector<int64_t>{classes, features} : std::vector<int64_t>{features, classes},
                                     random_weights(rng, static_cast<size_t>(features * classes)), Quant{0.01, 0});
  const ElemType lt = random_type(rng);
  const Quant lq = random_quant(rng, lt);
  const int32_t logits = b.tensor("logits", lt, {shape[0], classes}, lq);
  const fx::Multiplier m = make_mult(q.scale * 0.01 / lq.scale / 8.0);
  b.bpu("matmul", {flat, wm, -1}, {logits},
        {ints("b_transposed", {transposed ? 1 : 0}), ints("multiplier_mantissa", {m.mantissa}), ints("multiplier_shift", {m.shift})});
  const int32_t out = b.output("out", {shape[0], classes});
  b.bpu("dequantize", {logits}, {out});
  return b.model;
}

std::vector<float> run_with(const Model& model, Kernels kernels, const std::vector<float>& input) {
  auto ex = Executor::create(model, kernels);
  REQUIRE_MESSAGE(ex.has_value(), ex.message());
  std::vector<std::vector<float>> outputs;
  const Status s = ex->run({std::span<const float>(input)}, outputs);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  return outputs.at(0);
}

// Every fast kernel set this CPU has (portable, avx2, the automatic best) gives the reference
// kernels' outputs on `inputs`.
void check_fast_equals_reference(const Model& model, const std::vector<std::vector<float>>& inputs) {
  const std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  auto reference = Executor::create(model, Kernels::reference);
  REQUIRE_MESSAGE(reference.has_value(), reference.message());
  std::vector<std::vector<float>> want;
  const Status s = reference->run(spans, want);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  for (const Kernels k : {Kernels::portable, Kernels::avx2, Kernels::automatic}) {
    if (k == Kernels::avx2 && !fx::fast::isa_supported(fx::fast::Isa::Avx2)) continue;
    if (k == Kernels::automatic && !fx::fast::isa_supported(fx::fast::best_isa())) continue;
    CAPTURE(static_cast<int>(k));
    auto fast = Executor::create(model, k);
    REQUIRE_MESSAGE(fast.has_value(), fast.message());
    std::vector<std::vector<float>> got;
    const Status st = fast->run(spans, got);
    REQUIRE_MESSAGE(st.is_ok(), st.message());
    CHECK(got == want);
  }
}

// Values in [-4, 4] for an input of `shape` (N, C, H, W).
std::vector<float> random_input(std::mt19937& rng, const std::vector<int64_t>& shape) {
  std::vector<float> input(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  for (auto& v : input) v = d(rng);
  return input;
}

}  // namespace

TEST_CASE("random lowered CNNs give bit-identical outputs on the reference and the fast kernels") {
  std::vector<Kernels> fast{Kernels::portable};
  if (fx::fast::isa_supported(fx::fast::Isa::Avx2)) fast.push_back(Kernels::avx2);
  if (fx::fast::isa_supported(fx::fast::Isa::AvxVnni)) fast.push_back(Kernels::avxvnni);
  if (fx::fast::isa_supported(fx::fast::Isa::Avx512Vnni)) fast.push_back(Kernels::avx512vnni);
  std::mt19937 rng(21);
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    std::vector<int64_t> shape;
    const Model model = random_model(rng, shape);
    const std::vector<float> input = random_input(rng, shape);
    const std::vector<float> want = run_with(model, Kernels::reference, input);
    for (const Kernels k : fast) CHECK(run_with(model, k, input) == want);
  }
}

TEST_CASE("the executor names its kernels; QFLOW_RT_KERNELS selects them; a missing instruction set is an error") {
  std::mt19937 rng(3);
  std::vector<int64_t> shape;
  const Model model = random_model(rng, shape);
  {
    auto ex = Executor::create(model, Kernels::reference);
    REQUIRE(ex.has_value());
    CHECK(ex->kernels() == "reference");
  }
  {
    auto ex = Executor::create(model, Kernels::portable);
    REQUIRE(ex.has_value());
    CHECK(ex->kernels() == "portable");
  }
  const char* saved = std::getenv("QFLOW_RT_KERNELS");
  const std::string previous = saved ? saved : "";
  setenv("QFLOW_RT_KERNELS", "reference", 1);
  {
    auto ex = Executor::create(model);
    REQUIRE(ex.has_value());
    CHECK(ex->kernels() == "reference");
  }
  setenv("QFLOW_RT_KERNELS", "sse9", 1);
  {
    auto ex = Executor::create(model);
    REQUIRE_FALSE(ex.has_value());
    CHECK(contains(ex.message(), "QFLOW_RT_KERNELS"));
  }
  unsetenv("QFLOW_RT_KERNELS");
  {
    auto ex = Executor::create(model);
    REQUIRE(ex.has_value());
    CHECK(ex->kernels() == fx::fast::isa_name(fx::fast::best_isa()));
  }
  if (!previous.empty()) setenv("QFLOW_RT_KERNELS", previous.c_str(), 1);
  for (const auto& [kernels, isa] : {std::pair{Kernels::avxvnni, fx::fast::Isa::AvxVnni},
                                     std::pair{Kernels::avx512vnni, fx::fast::Isa::Avx512Vnni}})
    if (!fx::fast::isa_supported(isa)) {
      auto ex = Executor::create(model, kernels);
      REQUIRE_FALSE(ex.has_value());
      CHECK(contains(ex.message(), "lacks"));
    }
}

TEST_CASE("the instruction-set cap bounds automatic kernels; every cap gives the reference bits") {
  namespace isa = qflow::isa;
  struct Reset {
    ~Reset() { isa::reset_cap(); }
  } reset;
  const char* saved = std::getenv("QFLOW_RT_KERNELS");
  const std::string previous = saved ? saved : "";
  unsetenv("QFLOW_RT_KERNELS");
  // The kernels each cap selects on this CPU: the best not above it.
  auto expected = [](isa::Level cap) {
    using fx::fast::Isa;
    for (const auto& [level, kernels] : {std::pair{isa::Level::avx512, Isa::Avx512Vnni},
                                         std::pair{isa::Level::avxvnni, Isa::AvxVnni}, std::pair{isa::Level::avx2, Isa::Avx2}})
      if (static_cast<int>(level) <= static_cast<int>(cap) && fx::fast::isa_supported(kernels)) return fx::fast::isa_name(kernels);
    return fx::fast::isa_name(Isa::Portable);
  };
  std::mt19937 rng(33);
  for (int trial = 0; trial < 20; ++trial) {
    CAPTURE(trial);
    std::vector<int64_t> shape;
    const Model model = random_model(rng, shape);
    const std::vector<float> input = random_input(rng, shape);
    const std::vector<float> want = run_with(model, Kernels::reference, input);
    for (const isa::Level cap : {isa::Level::portable, isa::Level::avx2, isa::Level::avxvnni, isa::Level::avx512,
                                 isa::Level::native}) {
      if (!isa::cpu_has(cap)) continue;
      CAPTURE(isa::level_name(cap));
      REQUIRE(isa::set_cap(isa::level_name(cap), "QFLOW_ISA").is_ok());
      auto ex = Executor::create(model);
      REQUIRE_MESSAGE(ex.has_value(), ex.message());
      CHECK(ex->kernels() == expected(cap));
      CHECK(run_with(model, Kernels::automatic, input) == want);
    }
  }
  std::vector<int64_t> shape;
  const Model model = random_model(rng, shape);
  REQUIRE(isa::set_cap("portable", "QFLOW_ISA").is_ok());
  if (fx::fast::isa_supported(fx::fast::Isa::Avx2)) {
    // QFLOW_RT_KERNELS may not exceed the cap; the explicit option is an exact request.
    setenv("QFLOW_RT_KERNELS", "avx2", 1);
    auto refused = Executor::create(model);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.message() == "QFLOW_RT_KERNELS=avx2: above the instruction-set cap portable (QFLOW_ISA or --isa)");
    unsetenv("QFLOW_RT_KERNELS");
    auto exact = Executor::create(model, Kernels::avx2);
    REQUIRE(exact.has_value());
    CHECK(exact->kernels() == "avx2");
  }
  setenv("QFLOW_RT_KERNELS", "reference", 1);
  {
    auto ex = Executor::create(model);
    REQUIRE(ex.has_value());
    CHECK(ex->kernels() == "reference");
  }
  unsetenv("QFLOW_RT_KERNELS");
  if (!isa::cpu_has(isa::Level::avx512)) {
    const Status s = isa::set_cap("avx512", "QFLOW_ISA");
    CHECK(contains(s.message(), "QFLOW_ISA=avx512: this CPU lacks the instructions of avx512"));
    CHECK(isa::cap() == isa::Level::portable);  // refused: nothing changed
  }
  CHECK(isa::set_cap("sse9", "QFLOW_ISA").message() ==
        "QFLOW_ISA=sse9: unknown instruction set; expected portable, avx2, avxvnni, avx512 or native");
  if (!previous.empty()) setenv("QFLOW_RT_KERNELS", previous.c_str(), 1);
}

TEST_CASE("elementwise chains run as tables: hardswish as x * lut(x), shared and output tensors, two roots") {
  // quantize -> xq; lut(xq) -> s; mul(xq, s) -> h (hardswish: both inputs are functions of xq);
  // add(h, c) -> a; a is an output and the input of mul(a, yq) with a second root (not fused);
  // h also feeds a requantize. Every output must match the reference kernels bit for bit.
  std::mt19937 rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    CAPTURE(trial);
    Builder b;
    const std::vector<int64_t> shape{1, 3, 5, 7};
    const int32_t x = b.input("x", shape), x2 = b.input("x2", shape);
    const ElemType t = random_type(rng);
    const Quant q = random_quant(rng, t);
    const int32_t xq = b.tensor("xq", t, shape, q), yq = b.tensor("yq", t, shape, q);
    b.bpu("quantize", {x}, {xq});
    b.bpu("quantize", {x2}, {yq});
    fx::Lut lut;
    const ElemType st = random_type(rng);
    const Quant sq = random_quant(rng, st);
    REQUIRE(fx::build_hard_sigmoid_lut(qp(t, q), qp(st, sq), 1.0 / 6.0, 0.5, 0, lut).is_ok());
    const int32_t table = b.constant_ints("table", ElemType::i32, {256}, std::vector<int64_t>(lut.entries.begin(), lut.entries.end()));
    const int32_t s = b.tensor("s", st, shape, sq);
    b.bpu("lut", {xq, table}, {s}, {ints("segment_bits", {0})});
    const ElemType ht = random_type(rng);
    const Quant hq = random_quant(rng, ht);
    const int32_t h = b.tensor("h", ht, shape, hq);
    fx::MulParams mp;
    REQUIRE(fx::make_mul_params(qp(t, q), qp(st, sq), qp(ht, hq), mp).is_ok());
    b.bpu("mul", {xq, s}, {h}, {multiplier("multiplier", mp.multiplier)});
    const int32_t c = b.constant_ints("c", ht, {1}, {ht == ElemType::u8 ? pick(rng, 0, 255) : pick(rng, -128, 127)}, hq);
    const ElemType at = random_type(rng);
    const Quant aq = random_quant(rng, at);
    const int32_t a = b.tensor("a", at, shape, aq);
    fx::AddParams ap;
    REQUIRE(fx::make_add_params(qp(ht, hq), qp(ht, hq), qp(at, aq), false, ap).is_ok());
    b.bpu("add", {h, c}, {a},
          {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
           multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)});
    const int32_t two = b.tensor("two_roots", at, shape, aq);
    fx::MulParams mp2;
    REQUIRE(fx::make_mul_params(qp(at, aq), qp(t, q), qp(at, aq), mp2).is_ok());
    b.bpu("mul", {a, yq}, {two}, {multiplier("multiplier", mp2.multiplier)});
    const int32_t r = b.tensor("r", t, shape, q);
    b.bpu("requantize", {h}, {r}, {multiplier("multiplier", make_mult(hq.scale / q.scale))});
    int32_t k = 0;
    for (const int32_t v : {a, two, r}) {
      const int32_t out = b.output("out" + std::to_string(k++), shape);
      b.bpu("dequantize", {v}, {out});
    }
    std::vector<float> in1(105), in2(105);
    std::uniform_real_distribution<float> d(-6.0f, 6.0f);
    for (auto& v : in1) v = d(rng);
    for (auto& v : in2) v = d(rng);
    check_fast_equals_reference(b.model, {in1, in2});
  }
}

TEST_CASE("add, sub and mul with an operand broadcast along runs of the output equal the reference, on either side") {
  // [1, C, 1, 1] and [C, 1, 1] against [2, C, 4, 5] (runs of 20), a scalar (one run), and
  // [1, 1, 1, 5] (runs of 5: expanded as before), as the first or the second operand, with
  // 8- and 16-bit types.
  std::mt19937 rng(8);
  const std::vector<int64_t> shape{2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> smalls{{1, 3, 1, 1}, {3, 1, 1}, {1}, {1, 1, 1, 5}};
  for (int trial = 0; trial < 48; ++trial) {
    CAPTURE(trial);
    const std::string op = trial % 3 == 0 ? "mul" : trial % 3 == 1 ? "add" : "sub";
    const std::vector<int64_t>& small = smalls[static_cast<size_t>(trial / 3) % smalls.size()];
    const bool small_first = trial % 2 == 1;
    const ElemType t = trial % 4 < 2 ? random_type(rng) : ElemType::i16;
    const Quant q{0.02 + 0.01 * static_cast<double>(rng() % 5), t == ElemType::i16 ? 0 : random_quant(rng, t).zero_point};
    Builder b;
    const int32_t x = b.input("x", shape), s = b.input("s", small);
    const int32_t xq = b.tensor("xq", t, shape, q), sq = b.tensor("sq", t, small, q);
    b.bpu("quantize", {x}, {xq});
    b.bpu("quantize", {s}, {sq});
    const ElemType yt = random_type(rng);
    const Quant yq = random_quant(rng, yt);
    const int32_t y = b.tensor("y", yt, shape, yq);
    const std::vector<int32_t> operands = small_first ? std::vector<int32_t>{sq, xq} : std::vector<int32_t>{xq, sq};
    if (op == "mul") {
      fx::MulParams mp;
      REQUIRE(fx::make_mul_params(qp(t, q), qp(t, q), qp(yt, yq), mp).is_ok());
      b.bpu("mul", operands, {y}, {multiplier("multiplier", mp.multiplier)});
    } else {
      fx::AddParams ap;
      REQUIRE(fx::make_add_params(qp(t, q), qp(t, Quant{q.scale * 3.0, q.zero_point}), qp(yt, yq), op == "sub", ap).is_ok());
      b.bpu(op, operands, {y},
            {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
             multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)});
    }
    const int32_t out = b.output("out", shape);
    b.bpu("dequantize", {y}, {out});
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    size_t small_count = 1;
    for (const int64_t v : small) small_count *= static_cast<size_t>(v);
    std::vector<float> in1(120), in2(small_count);
    for (auto& v : in1) v = d(rng);
    for (auto& v : in2) v = d(rng);
    check_fast_equals_reference(b.model, {in1, in2});
  }
}

TEST_CASE("elementwise chains of 16-bit tensors run as 65536-entry tables with the reference's values") {
  // quantize -> xq (int16 or uint16); add(xq, c) -> a; mul(a, xq) -> h (x * (x + c), two reads
  // of the root); requantize(h) -> r (int8); outputs h and r. Every value of the root is
  // reached by inputs spread over the type's whole range.
  std::mt19937 rng(16);
  for (int trial = 0; trial < 6; ++trial) {
    CAPTURE(trial);
    Builder b;
    const std::vector<int64_t> shape{1, 2, 64, 512};
    const int32_t x = b.input("x", shape);
    const ElemType t = trial % 2 ? ElemType::i16 : ElemType::u16;
    const Quant q{1.0 / 4096.0 * static_cast<double>(1 + rng() % 3), t == ElemType::u16 ? static_cast<int32_t>(pick(rng, 0, 65535)) : 0};
    const int32_t xq = b.tensor("xq", t, shape, q);
    b.bpu("quantize", {x}, {xq});
    const Quant aq{q.scale * 1.5, t == ElemType::u16 ? 30000 : 0};
    const int32_t c = b.constant_ints("c", t, {1}, {t == ElemType::u16 ? pick(rng, 0, 65535) : pick(rng, -32768, 32767)}, q);
    const int32_t a = b.tensor("a", t, shape, aq);
    fx::AddParams ap;
    REQUIRE(fx::make_add_params(qp(t, q), qp(t, q), qp(t, aq), false, ap).is_ok());
    b.bpu("add", {xq, c}, {a},
          {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
           multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)});
    const Quant hq{q.scale * 8.0, 0};
    const int32_t h = b.tensor("h", ElemType::i16, shape, hq);
    fx::MulParams mp;
    REQUIRE(fx::make_mul_params(qp(t, aq), qp(t, q), qp(ElemType::i16, hq), mp).is_ok());
    b.bpu("mul", {a, xq}, {h}, {multiplier("multiplier", mp.multiplier)});
    const Quant rq{hq.scale * 300.0, 0};
    const int32_t r = b.tensor("r", ElemType::i8, shape, rq);
    b.bpu("requantize", {h}, {r}, {multiplier("multiplier", make_mult(hq.scale / rq.scale))});
    const int32_t out_h = b.output("out_h", shape), out_r = b.output("out_r", shape);
    b.bpu("dequantize", {h}, {out_h});
    b.bpu("dequantize", {r}, {out_r});
    std::vector<float> in(static_cast<size_t>(2 * 64 * 512));
    const double lo = q.scale * (fx::range_of(t == ElemType::i16 ? fx::QType::Int16 : fx::QType::UInt16).min - q.zero_point);
    const double hi = q.scale * (fx::range_of(t == ElemType::i16 ? fx::QType::Int16 : fx::QType::UInt16).max - q.zero_point);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(in.size() - 1));
    check_fast_equals_reference(b.model, {in});
  }
}
