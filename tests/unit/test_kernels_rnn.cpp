// Unit tests for the RNN, GRU and LSTM kernels: hand-computed single steps, every activation,
// and the identities that tie directions, sequence lengths and layouts together.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/node_runner.h"
#include "tests/unit/test_model_util.h"

namespace qflow {
namespace {

using testing::SingleNode;
using testing::run_single_node;

using test::noise;
using test::floats;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

std::vector<Tensor> run(const SingleNode& spec) {
  auto out = run_single_node(spec);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return std::move(out).value();
}

float at(const Tensor& t, int64_t i) { return t.data<float>()[i]; }

// Element (i0, i1, ...) of a row-major float tensor.
float element(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0, k = 0;
  for (int64_t i : index) offset = offset * t.dim(k++) + i;
  return at(t, offset);
}

// out[index permuted] = in[index]: out's axis a is in's axis perm[a].
Tensor permute(const Tensor& in, const std::vector<int64_t>& perm) {
  Shape shape;
  for (int64_t p : perm) shape.push_back(in.dim(p));
  Tensor out(DType::Float32, shape);
  const std::size_t rank = perm.size();
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < in.numel(); ++i) {
    int64_t offset = 0;
    for (std::size_t a = 0; a < rank; ++a) offset = offset * shape[a] + index[static_cast<std::size_t>(perm[a])];
    out.data<float>()[offset] = at(in, i);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < in.dim(static_cast<int64_t>(d))) break;
      index[d] = 0;
    }
  }
  return out;
}

// Direction d of a tensor whose first axis is num_directions, keeping that axis (size 1).
Tensor direction_slice(const Tensor& t, int64_t d) {
  Shape shape = t.shape();
  const int64_t n = t.numel() / shape[0];
  shape[0] = 1;
  Tensor out(DType::Float32, shape);
  std::copy_n(t.data<float>() + d * n, n, out.data<float>());
  return out;
}

void check_bitwise(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    CHECK(at(got, i) == at(expected, i));
  }
}

int64_t gates_of(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
int outputs_of(const std::string& op) { return op == "LSTM" ? 3 : 2; }

// A random recurrent problem in layout 0, with every optional input present.
struct Problem {
  std::string op;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  Tensor x, w, r, b, lens, h0, c0, p;
};

Problem make_problem(const std::string& op, int64_t directions, std::vector<int32_t> lens, uint32_t seed) {
  Problem pr;
  pr.op = op;
  pr.seq = 4;
  pr.batch = static_cast<int64_t>(lens.size());
  pr.input = 3;
  pr.hidden = 5;
  pr.directions = directions;
  const int64_t width = gates_of(op) * pr.hidden;
  pr.x = floats({pr.seq, pr.batch, pr.input}, noise(pr.seq * pr.batch * pr.input, seed));
  pr.w = floats({directions, width, pr.input}, noise(directions * width * pr.input, seed + 1));
  pr.r = floats({directions, width, pr.hidden}, noise(directions * width * pr.hidden, seed + 2));
  pr.b = floats({directions, 2 * width}, noise(directions * 2 * width, seed + 3));
  pr.lens = Tensor::from_vector<int32_t>({pr.batch}, lens);
  pr.h0 = floats({directions, pr.batch, pr.hidden}, noise(directions * pr.batch * pr.hidden, seed + 4));
  pr.c0 = floats({directions, pr.batch, pr.hidden}, noise(directions * pr.batch * pr.hidden, seed + 5));
  pr.p = floats({directions, 3 * pr.hidden}, noise(directions * 3 * pr.hidden, seed + 6));
  return pr;
}

// The node for `pr` (direction d of it when `d` >= 0), with all its outputs.
SingleNode node_for(const Problem& pr, const std::string& direction, int64_t d = -1) {
  const auto part = [&](const Tensor& t) { return d < 0 ? t : direction_slice(t, d); };
  SingleNode spec;
  spec.op_type = pr.op;
  spec.inputs = {pr.x, part(pr.w), part(pr.r), part(pr.b), pr.lens, part(pr.h0)};
  if (pr.op == "LSTM") {
    spec.inputs.push_back(part(pr.c0));
    spec.inputs.push_back(part(pr.p));
  }
  spec.attributes = {Attribute::make_string("direction", direction), Attribute::make_int("hidden_size", pr.hidden)};
  spec.outputs = outputs_of(pr.op);
  return spec;
}

const char* const kOps[] = {"RNN", "GRU", "LSTM"};

// Hand-computed single steps -------------------------------------------------------------------

TEST_CASE("LSTM: one step of one unit with peepholes, computed by hand") {
  const float x = 0.5f, h0 = 0.3f, c0 = -0.2f;
  // Gate order i, o, f, c; peepholes i, o, f.
  const float w[] = {0.2f, -0.3f, 0.4f, 0.6f}, r[] = {0.1f, 0.2f, -0.1f, 0.5f};
  const float wb[] = {0.01f, 0.02f, 0.03f, 0.04f}, rb[] = {0.05f, 0.06f, 0.07f, 0.08f};
  const float p[] = {0.3f, -0.4f, 0.2f};
  const float i = sigmoid(w[0] * x + r[0] * h0 + wb[0] + rb[0] + p[0] * c0);
  const float f = sigmoid(w[2] * x + r[2] * h0 + wb[2] + rb[2] + p[2] * c0);
  const float g = std::tanh(w[3] * x + r[3] * h0 + wb[3] + rb[3]);
  const float c = f * c0 + i * g;
  const float o = sigmoid(w[1] * x + r[1] * h0 + wb[1] + rb[1] + p[1] * c);
  const float h = o * std::tanh(c);

  SingleNode spec;
  spec.op_type = "LSTM";
  spec.inputs = {floats({1, 1, 1}, {x}), floats({1, 4, 1}, {w[0], w[1], w[2], w[3]}),
                 floats({1, 4, 1}, {r[0], r[1], r[2], r[3]}),
                 floats({1, 8}, {wb[0], wb[1], wb[2], wb[3], rb[0], rb[1], rb[2], rb[3]}), Tensor(),
                 floats({1, 1, 1}, {h0}), floats({1, 1, 1}, {c0}), floats({1, 3}, {p[0], p[1], p[2]})};
  spec.attributes = {Attribute::make_int("hidden_size", 1)};
  spec.outputs = 3;
  const auto out = run(spec);
  REQUIRE(out[0].shape() == Shape{1, 1, 1, 1});
  CHECK(at(out[0], 0) == doctest::Approx(h).epsilon(1e-6));
  CHECK(at(out[1], 0) == doctest::Approx(h).epsilon(1e-6));
  CHECK(at(out[2], 0) == doctest::Approx(c).epsilon(1e-6));

  // input_forget couples the gates: f = 1 - i.
  spec.attributes.push_back(Attribute::make_int("input_forget", 1));
  const float c_coupled = (1.0f - i) * c0 + i * g;
  const float h_coupled = sigmoid(w[1] * x + r[1] * h0 + wb[1] + rb[1] + p[1] * c_coupled) * std::tanh(c_coupled);
  const auto coupled = run(spec);
  CHECK(at(coupled[2], 0) == doctest::Approx(c_coupled).epsilon(1e-6));
  CHECK(at(coupled[1], 0) == doctest::Approx(h_coupled).epsilon(1e-6));
}

TEST_CASE("GRU: one step of one unit, computed by hand, both reset placements") {
  const float x = -0.7f, h0 = 0.4f;
  // Gate order z, r, h.
  const float w[] = {0.3f, -0.5f, 0.8f}, r[] = {-0.2f, 0.6f, 0.9f};
  const float wb[] = {0.1f, -0.1f, 0.2f}, rb[] = {0.05f, 0.15f, -0.3f};
  const float z = sigmoid(w[0] * x + r[0] * h0 + wb[0] + rb[0]);
  const float reset = sigmoid(w[1] * x + r[1] * h0 + wb[1] + rb[1]);
  const float h_after = std::tanh(w[2] * x + r[2] * (reset * h0) + wb[2] + rb[2]);
  const float h_before = std::tanh(w[2] * x + reset * (r[2] * h0 + rb[2]) + wb[2]);

  SingleNode spec;
  spec.op_type = "GRU";
  spec.inputs = {floats({1, 1, 1}, {x}), floats({1, 3, 1}, {w[0], w[1], w[2]}), floats({1, 3, 1}, {r[0], r[1], r[2]}),
                 floats({1, 6}, {wb[0], wb[1], wb[2], rb[0], rb[1], rb[2]}), Tensor(), floats({1, 1, 1}, {h0})};
  spec.outputs = 2;
  for (int64_t linear_before_reset : {0, 1}) {
    INFO("linear_before_reset " << linear_before_reset);
    spec.attributes = {Attribute::make_int("hidden_size", 1),
                       Attribute::make_int("linear_before_reset", linear_before_reset)};
    const float candidate = linear_before_reset ? h_before : h_after;
    const float expected = (1.0f - z) * candidate + z * h0;
    const auto out = run(spec);
    CHECK(at(out[0], 0) == doctest::Approx(expected).epsilon(1e-6));
    CHECK(at(out[1], 0) == doctest::Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("RNN: every activation, its alpha and beta, and clip") {
  // Weight 1, no recurrence, no bias: one step applies the activation to x itself.
  const std::vector<float> xs = {-2.0f, -0.5f, 0.0f, 0.3f, 1.5f};
  const int64_t batch = static_cast<int64_t>(xs.size());
  struct Case {
    std::string name;
    std::vector<float> alpha, beta;
    float (*expected)(float);
  };
  const Case cases[] = {
      {"Relu", {}, {}, [](float v) { return std::max(v, 0.0f); }},
      {"Tanh", {}, {}, [](float v) { return std::tanh(v); }},
      {"Sigmoid", {}, {}, [](float v) { return sigmoid(v); }},
      {"Affine", {}, {}, [](float v) { return v; }},
      {"Affine", {2.0f}, {0.5f}, [](float v) { return 2.0f * v + 0.5f; }},
      {"LeakyRelu", {}, {}, [](float v) { return v >= 0 ? v : 0.01f * v; }},
      {"LeakyRelu", {0.2f}, {}, [](float v) { return v >= 0 ? v : 0.2f * v; }},
      {"ThresholdedRelu", {}, {}, [](float v) { return v >= 1.0f ? v : 0.0f; }},
      {"ThresholdedRelu", {0.25f}, {}, [](float v) { return v >= 0.25f ? v : 0.0f; }},
      {"ScaledTanh", {1.5f}, {0.7f}, [](float v) { return 1.5f * std::tanh(0.7f * v); }},
      {"HardSigmoid", {}, {}, [](float v) { return std::clamp(0.2f * v + 0.5f, 0.0f, 1.0f); }},
      {"HardSigmoid", {0.4f}, {0.1f}, [](float v) { return std::clamp(0.4f * v + 0.1f, 0.0f, 1.0f); }},
      {"Elu", {}, {}, [](float v) { return v >= 0 ? v : std::exp(v) - 1.0f; }},
      {"Elu", {0.5f}, {}, [](float v) { return v >= 0 ? v : 0.5f * (std::exp(v) - 1.0f); }},
      {"Softsign", {}, {}, [](float v) { return v / (1.0f + std::fabs(v)); }},
      {"Softplus", {}, {}, [](float v) { return std::log(1.0f + std::exp(v)); }},
  };
  for (const Case& c : cases) {
    INFO(c.name << " alpha " << (c.alpha.empty() ? -1.0f : c.alpha[0]));
    SingleNode spec;
    spec.op_type = "RNN";
    spec.inputs = {floats({1, batch, 1}, xs), floats({1, 1, 1}, {1.0f}), floats({1, 1, 1}, {0.0f})};
    spec.attributes = {Attribute::make_int("hidden_size", 1), Attribute::make_strings("activations", {c.name})};
    if (!c.alpha.empty()) spec.attributes.push_back(Attribute::make_floats("activation_alpha", c.alpha));
    if (!c.beta.empty()) spec.attributes.push_back(Attribute::make_floats("activation_beta", c.beta));
    const Tensor y = run(spec)[0];
    for (int64_t b = 0; b < batch; ++b)
      CHECK(at(y, b) == doctest::Approx(c.expected(xs[static_cast<std::size_t>(b)])).epsilon(1e-6));
  }

  SingleNode clipped;
  clipped.op_type = "RNN";
  clipped.inputs = {floats({1, batch, 1}, xs), floats({1, 1, 1}, {1.0f}), floats({1, 1, 1}, {0.0f})};
  clipped.attributes = {Attribute::make_int("hidden_size", 1), Attribute::make_float("clip", 0.4f)};
  const Tensor y = run(clipped)[0];
  for (int64_t b = 0; b < batch; ++b)
    CHECK(at(y, b) == doctest::Approx(std::tanh(std::clamp(xs[static_cast<std::size_t>(b)], -0.4f, 0.4f))).epsilon(1e-6));
}

TEST_CASE("LSTM: alpha and beta are consumed in the order of the activations that take them") {
  // f = HardSigmoid(0.3, 0.4), g = LeakyRelu(0.05), h = Affine(2, default beta 0).
  const float x = -0.8f;
  const float i = std::clamp(0.3f * x + 0.4f, 0.0f, 1.0f), f = i, o = i;
  const float g = 0.05f * x;
  const float c = f * 0.0f + i * g;
  const float h = o * (2.0f * c);
  SingleNode spec;
  spec.op_type = "LSTM";
  spec.inputs = {floats({1, 1, 1}, {x}), floats({1, 4, 1}, {1, 1, 1, 1}), floats({1, 4, 1}, {0, 0, 0, 0})};
  spec.attributes = {Attribute::make_int("hidden_size", 1),
                     Attribute::make_strings("activations", {"HardSigmoid", "LeakyRelu", "Affine"}),
                     Attribute::make_floats("activation_alpha", {0.3f, 0.05f, 2.0f}),
                     Attribute::make_floats("activation_beta", {0.4f})};
  spec.outputs = 3;
  const auto out = run(spec);
  CHECK(at(out[2], 0) == doctest::Approx(c).epsilon(1e-6));
  CHECK(at(out[1], 0) == doctest::Approx(h).epsilon(1e-6));
}

TEST_CASE("RNN: float64 computes the same step") {
  SingleNode spec;
  spec.op_type = "RNN";
  spec.inputs = {Tensor::from_vector<double>({1, 1, 2}, {0.5, -1.0}), Tensor::from_vector<double>({1, 1, 2}, {0.3, 0.2}),
                 Tensor::from_vector<double>({1, 1, 1}, {0.7}), Tensor::from_vector<double>({1, 2}, {0.1, -0.05}),
                 Tensor(), Tensor::from_vector<double>({1, 1, 1}, {0.25})};
  spec.attributes = {Attribute::make_int("hidden_size", 1)};
  spec.outputs = 2;
  const auto out = run(spec);
  REQUIRE(out[1].dtype() == DType::Float64);
  CHECK(out[1].data<double>()[0] == doctest::Approx(std::tanh(0.5 * 0.3 - 1.0 * 0.2 + 0.7 * 0.25 + 0.1 - 0.05)));
}

// Identities between directions, lengths and layouts -------------------------------------------

TEST_CASE("bidirectional is the forward and the reverse run side by side") {
  for (const char* op : kOps) {
    INFO(op);
    const Problem pr = make_problem(op, 2, {4, 2, 3}, 17);
    const auto both = run(node_for(pr, "bidirectional"));
    const auto forward = run(node_for(pr, "forward", 0));
    const auto reverse = run(node_for(pr, "reverse", 1));
    REQUIRE(both[0].shape() == Shape{pr.seq, 2, pr.batch, pr.hidden});
    for (int64_t t = 0; t < pr.seq; ++t)
      for (int64_t b = 0; b < pr.batch; ++b)
        for (int64_t j = 0; j < pr.hidden; ++j) {
          CHECK(element(both[0], {t, 0, b, j}) == element(forward[0], {t, 0, b, j}));
          CHECK(element(both[0], {t, 1, b, j}) == element(reverse[0], {t, 0, b, j}));
        }
    for (std::size_t k = 1; k < both.size(); ++k) {
      check_bitwise(direction_slice(both[k], 0), forward[k]);
      check_bitwise(direction_slice(both[k], 1), reverse[k]);
    }
  }
}

TEST_CASE("reverse on x is forward on x reversed within each sequence's length") {
  for (const char* op : kOps) {
    INFO(op);
    Problem pr = make_problem(op, 1, {4, 1, 3, 2}, 29);
    const auto reverse = run(node_for(pr, "reverse"));
    const std::vector<int32_t> lens = {4, 1, 3, 2};
    Tensor flipped = pr.x.clone();
    for (int64_t b = 0; b < pr.batch; ++b) {
      const int64_t len = lens[static_cast<std::size_t>(b)];
      for (int64_t t = 0; t < len; ++t)
        std::copy_n(pr.x.data<float>() + ((len - 1 - t) * pr.batch + b) * pr.input, pr.input,
                    flipped.data<float>() + (t * pr.batch + b) * pr.input);
    }
    pr.x = flipped;
    const auto forward = run(node_for(pr, "forward"));
    for (int64_t b = 0; b < pr.batch; ++b) {
      const int64_t len = lens[static_cast<std::size_t>(b)];
      for (int64_t t = 0; t < pr.seq; ++t)
        for (int64_t j = 0; j < pr.hidden; ++j) {
          const float expected = t < len ? element(forward[0], {len - 1 - t, 0, b, j}) : 0.0f;
          CHECK(element(reverse[0], {t, 0, b, j}) == expected);
        }
    }
    for (std::size_t k = 1; k < reverse.size(); ++k) check_bitwise(reverse[k], forward[k]);
  }
}

TEST_CASE("sequence_lens: steps past a sequence's end are zero and Y_h is its last step") {
  for (const char* op : kOps) {
    for (const char* direction : {"forward", "reverse"}) {
      INFO(op << " " << direction);
      const std::vector<int32_t> lens = {4, 2, 1, 3};
      const Problem pr = make_problem(op, 1, lens, 41);
      const auto out = run(node_for(pr, direction));
      const bool reverse = std::string(direction) == "reverse";
      for (int64_t b = 0; b < pr.batch; ++b) {
        const int64_t len = lens[static_cast<std::size_t>(b)];
        const int64_t last = reverse ? 0 : len - 1;
        for (int64_t j = 0; j < pr.hidden; ++j) {
          for (int64_t t = len; t < pr.seq; ++t) CHECK(element(out[0], {t, 0, b, j}) == 0.0f);
          CHECK(element(out[0], {last, 0, b, j}) == element(out[1], {0, b, j}));
        }
        // The entry alone, cut to its length, gives the same outputs.
        Problem one = pr;
        one.seq = len;
        one.batch = 1;
        one.x = Tensor(DType::Float32, {len, 1, pr.input});
        for (int64_t t = 0; t < len; ++t)
          std::copy_n(pr.x.data<float>() + (t * pr.batch + b) * pr.input, pr.input, one.x.data<float>() + t * pr.input);
        one.lens = Tensor();
        const auto state_of = [&](const Tensor& t) {
          Tensor s(DType::Float32, {1, 1, pr.hidden});
          std::copy_n(t.data<float>() + b * pr.hidden, pr.hidden, s.data<float>());
          return s;
        };
        one.h0 = state_of(pr.h0);
        one.c0 = state_of(pr.c0);
        const auto alone = run(node_for(one, direction));
        for (int64_t t = 0; t < len; ++t)
          for (int64_t j = 0; j < pr.hidden; ++j)
            CHECK(element(out[0], {t, 0, b, j}) == doctest::Approx(element(alone[0], {t, 0, 0, j})).epsilon(1e-6));
        for (std::size_t k = 1; k < out.size(); ++k)
          for (int64_t j = 0; j < pr.hidden; ++j)
            CHECK(element(out[k], {0, b, j}) == doctest::Approx(element(alone[k], {0, 0, j})).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("layout 1 is layout 0 with batch-major inputs and outputs") {
  for (const char* op : kOps) {
    INFO(op);
    const Problem pr = make_problem(op, 2, {3, 4, 1}, 53);
    SingleNode seq_major = node_for(pr, "bidirectional");
    seq_major.opset = 14;
    const auto expected = run(seq_major);

    SingleNode batch_major = seq_major;
    batch_major.attributes.push_back(Attribute::make_int("layout", 1));
    batch_major.inputs[0] = permute(pr.x, {1, 0, 2});
    batch_major.inputs[5] = permute(pr.h0, {1, 0, 2});
    if (std::string(op) == "LSTM") batch_major.inputs[6] = permute(pr.c0, {1, 0, 2});
    const auto got = run(batch_major);
    REQUIRE(got[0].shape() == Shape{pr.batch, pr.seq, 2, pr.hidden});
    check_bitwise(got[0], permute(expected[0], {2, 0, 1, 3}));
    for (std::size_t k = 1; k < got.size(); ++k) {
      REQUIRE(got[k].shape() == Shape{pr.batch, 2, pr.hidden});
      check_bitwise(got[k], permute(expected[k], {1, 0, 2}));
    }
  }
}

TEST_CASE("recurrent results are bit-identical for any thread count") {
  for (const char* op : kOps) {
    INFO(op);
    SingleNode spec = node_for(make_problem(op, 2, {4, 3, 4, 2, 1}, 67), "bidirectional");
    const auto one = run(spec);
    spec.threads = 2;
    const auto two = run(spec);
    for (std::size_t k = 0; k < one.size(); ++k) CHECK(one[k].bitwise_equal(two[k]));
  }
}

TEST_CASE("recurrent kernels refuse malformed attributes and inputs") {
  Problem pr = make_problem("GRU", 1, {4, 4}, 79);
  SingleNode spec = node_for(pr, "sideways");
  CHECK_FALSE(run_single_node(spec).has_value());
  spec = node_for(pr, "forward");
  spec.attributes.push_back(Attribute::make_strings("activations", {"Sigmoid", "Cosh"}));
  CHECK_FALSE(run_single_node(spec).has_value());
  spec = node_for(pr, "forward");
  spec.inputs[4] = Tensor::from_vector<int32_t>({2}, {4, 5});
  CHECK_FALSE(run_single_node(spec).has_value());
  spec = node_for(pr, "bidirectional");
  CHECK_FALSE(run_single_node(spec).has_value());
}

}  // namespace
}  // namespace qflow
