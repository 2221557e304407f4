// cpu.LSTM against a scalar implementation of the ONNX formulas written here, in double, one
// gate at a time: directions, layouts, sequence lengths, initial states, peepholes, clip,
// input_forget, activations, absent inputs and outputs, and the errors.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "qflow/runtime/cpu_ops.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/test_lowered_common.h"

using namespace qflow::lowered;
using namespace qflow::lowered::test;

namespace {

// One LSTM problem. Empty vectors are absent inputs or attributes.
struct Case {
  std::string direction = "forward";
  int64_t layout = 0;
  int64_t seq = 4, batch = 3, input = 3, hidden = 2;
  std::vector<float> x, w, r, b, h0, c0, p;
  std::vector<int64_t> lens;
  std::vector<std::string> activations;
  std::vector<double> alpha, beta;
  std::optional<double> clip;
  bool input_forget = false;

  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::vector<int64_t> x_shape() const { return layout == 0 ? std::vector<int64_t>{seq, batch, input} : std::vector<int64_t>{batch, seq, input}; }
  std::vector<int64_t> y_shape() const {
    return layout == 0 ? std::vector<int64_t>{seq, dirs(), batch, hidden} : std::vector<int64_t>{batch, seq, dirs(), hidden};
  }
  std::vector<int64_t> state_shape() const {
    return layout == 0 ? std::vector<int64_t>{dirs(), batch, hidden} : std::vector<int64_t>{batch, dirs(), hidden};
  }
};

// Values in [-1, 1) from a fixed linear congruential sequence, so every run sees the same data.
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1u;
  for (float& f : v) {
    s = s * 1664525u + 1013904223u;
    f = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// A case with every input filled with data.
Case full_case(std::string direction, int64_t layout = 0) {
  Case c;
  c.direction = std::move(direction);
  c.layout = layout;
  const auto d = static_cast<size_t>(c.dirs()), h = static_cast<size_t>(c.hidden);
  const auto states = d * static_cast<size_t>(c.batch) * h;
  c.x = values(static_cast<size_t>(c.seq * c.batch * c.input), 1);
  c.w = values(d * 4 * h * static_cast<size_t>(c.input), 2);
  c.r = values(d * 4 * h * h, 3);
  c.b = values(d * 8 * h, 4);
  c.h0 = values(states, 5);
  c.c0 = values(states, 6);
  c.lens = {4, 2, 0};
  return c;
}

double activation(const std::string& name, double alpha, double beta, double x) {
  if (name == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (name == "Tanh") return std::tanh(x);
  if (name == "Relu") return std::max(x, 0.0);
  if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
  if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
  if (name == "Affine") return alpha * x + beta;
  FAIL("no reference for activation " << name);
  return 0.0;
}

struct Outputs {
  std::vector<double> y, y_h, y_c;
};

// The ONNX formulas, with the gates in the order W, R and B stack them (i, o, f, c):
//   i = f(X Wi + H Ri + Pi (.) C + Wbi + Rbi)      f = f(X Wf + H Rf + Pf (.) C + Wbf + Rbf)
//   c~ = g(X Wc + H Rc + Wbc + Rbc)                C' = f (.) C + i (.) c~
//   o = f(X Wo + H Ro + Po (.) C' + Wbo + Rbo)     H' = o (.) h(C')
Outputs reference(const Case& c) {
  const int64_t D = c.dirs(), S = c.seq, B = c.batch, I = c.input, H = c.hidden;
  const auto at = [](const std::vector<float>& v, int64_t i) { return static_cast<double>(v[static_cast<size_t>(i)]); };
  const auto x_at = [&](int64_t t, int64_t b, int64_t k) {
    return at(c.x, (c.layout == 0 ? t * B + b : b * S + t) * I + k);
  };
  const auto state_index = [&](int64_t d, int64_t b, int64_t j) {
    return (c.layout == 0 ? d * B + b : b * D + d) * H + j;
  };
  const auto y_index = [&](int64_t t, int64_t d, int64_t b, int64_t j) {
    return (c.layout == 0 ? (t * D + d) * B + b : (b * S + t) * D + d) * H + j;
  };
  std::vector<std::string> names = c.activations.empty() ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : c.activations;
  // Alphas and betas go to the activations that take them, in order.
  std::vector<double> alpha(names.size()), beta(names.size());
  size_t next_alpha = 0, next_beta = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string& n = names[k];
    alpha[k] = n == "HardSigmoid" ? 0.2 : n == "LeakyRelu" ? 0.01 : n == "Affine" ? 1.0 : 0.0;
    beta[k] = n == "HardSigmoid" ? 0.5 : 0.0;
    if ((n == "HardSigmoid" || n == "LeakyRelu" || n == "Affine") && next_alpha < c.alpha.size()) alpha[k] = c.alpha[next_alpha++];
    if ((n == "HardSigmoid" || n == "Affine") && next_beta < c.beta.size()) beta[k] = c.beta[next_beta++];
  }
  // One direction's three serve both directions.
  if (names.size() == 3 && D == 2)
    for (size_t k = 0; k < 3; ++k) {
      names.push_back(names[k]);
      alpha.push_back(alpha[k]);
      beta.push_back(beta[k]);
    }
  const auto clip = [&](double v) { return c.clip ? std::clamp(v, -*c.clip, *c.clip) : v; };

  Outputs o;
  o.y.assign(static_cast<size_t>(S * D * B * H), 0.0);
  o.y_h.assign(static_cast<size_t>(D * B * H), 0.0);
  o.y_c.assign(o.y_h.size(), 0.0);
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    const auto act = [&](size_t k, double v) {
      const size_t a = static_cast<size_t>(d) * 3 + k;
      return activation(names[a], alpha[a], beta[a], v);
    };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(static_cast<size_t>(H), 0.0), cell(h);
      for (int64_t j = 0; j < H; ++j) {
        if (!c.h0.empty()) h[static_cast<size_t>(j)] = at(c.h0, state_index(d, b, j));
        if (!c.c0.empty()) cell[static_cast<size_t>(j)] = at(c.c0, state_index(d, b, j));
      }
      const int64_t len = c.lens.empty() ? S : c.lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        // Gate g's input for unit j, before peepholes: X W^T + H R^T + Wb + Rb.
        const auto gate = [&](int64_t g, int64_t j) {
          const int64_t row = g * H + j;
          double v = 0.0;
          for (int64_t k = 0; k < I; ++k) v += x_at(t, b, k) * at(c.w, (d * 4 * H + row) * I + k);
          for (int64_t k = 0; k < H; ++k) v += h[static_cast<size_t>(k)] * at(c.r, (d * 4 * H + row) * H + k);
          if (!c.b.empty()) v += at(c.b, d * 8 * H + row) + at(c.b, d * 8 * H + 4 * H + row);
          return v;
        };
        const auto peep = [&](int64_t g, int64_t j) { return c.p.empty() ? 0.0 : at(c.p, d * 3 * H + g * H + j); };
        std::vector<double> next_h(h.size());
        for (int64_t j = 0; j < H; ++j) {
          const auto u = static_cast<size_t>(j);
          const double i_gate = act(0, clip(gate(0, j) + peep(0, j) * cell[u]));
          const double f_gate = c.input_forget ? 1.0 - i_gate : act(0, clip(gate(2, j) + peep(2, j) * cell[u]));
          const double candidate = act(1, clip(gate(3, j)));
          cell[u] = f_gate * cell[u] + i_gate * candidate;
          const double o_gate = act(0, clip(gate(1, j) + peep(1, j) * cell[u]));
          next_h[u] = o_gate * act(2, cell[u]);
        }
        h = next_h;
        for (int64_t j = 0; j < H; ++j) o.y[static_cast<size_t>(y_index(t, d, b, j))] = h[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        o.y_h[static_cast<size_t>(state_index(d, b, j))] = h[static_cast<size_t>(j)];
        o.y_c[static_cast<size_t>(state_index(d, b, j))] = cell[static_cast<size_t>(j)];
      }
    }
  }
  return o;
}

// A model of one cpu.LSTM: X a model input, the rest constants; `outputs` picks which of Y,
// Y_h, Y_c are present (the others are -1).
Model lstm_model(const Case& c, std::vector<bool> outputs = {true, true, true}) {
  Builder m;
  const auto dirs = c.dirs(), h = c.hidden;
  std::vector<int32_t> in{m.input("x", c.x_shape()), m.constant_f32("w", {dirs, 4 * h, c.input}, c.w),
                          m.constant_f32("r", {dirs, 4 * h, h}, c.r)};
  in.push_back(c.b.empty() ? -1 : m.constant_f32("b", {dirs, 8 * h}, c.b));
  in.push_back(c.lens.empty() ? -1 : m.constant_ints("lens", ElemType::i64, {c.batch}, c.lens));
  in.push_back(c.h0.empty() ? -1 : m.constant_f32("h0", c.state_shape(), c.h0));
  in.push_back(c.c0.empty() ? -1 : m.constant_f32("c0", c.state_shape(), c.c0));
  if (!c.p.empty()) in.push_back(m.constant_f32("p", {dirs, 3 * h}, c.p));
  const std::vector<int64_t> shapes[] = {c.y_shape(), c.state_shape(), c.state_shape()};
  const char* names[] = {"y", "y_h", "y_c"};
  std::vector<int32_t> out;
  for (size_t k = 0; k < 3; ++k) out.push_back(outputs[k] ? m.output(names[k], shapes[k]) : -1);
  while (!out.empty() && out.back() == -1) out.pop_back();
  std::vector<Attribute> attrs{ints("hidden_size", {h}), strings("direction", {c.direction})};
  if (c.layout != 0) attrs.push_back(ints("layout", {c.layout}));
  if (!c.activations.empty()) attrs.push_back(strings("activations", c.activations));
  if (!c.alpha.empty()) attrs.push_back(floats("activation_alpha", c.alpha));
  if (!c.beta.empty()) attrs.push_back(floats("activation_beta", c.beta));
  if (c.clip) attrs.push_back(floats("clip", {*c.clip}));
  if (c.input_forget) attrs.push_back(ints("input_forget", {1}));
  m.cpu("LSTM", in, out, std::move(attrs));
  return m.model;
}

void check_close(const std::vector<float>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(static_cast<double>(got[i]) == doctest::Approx(expected[i]).epsilon(1e-5));
  }
}

// Runs the case with all three outputs and compares each with the reference.
void check_case(const Case& c) {
  const Outputs want = reference(c);
  const std::vector<std::vector<float>> got = run(lstm_model(c), {c.x});
  REQUIRE(got.size() == 3);
  check_close(got[0], want.y);
  check_close(got[1], want.y_h);
  check_close(got[2], want.y_c);
}

}  // namespace

TEST_CASE("cpu LSTM: one step computed by hand, gates stacked i, o, f, c") {
  // input 1, hidden 1: W = (Wi, Wo, Wf, Wc), R likewise, B = (Wb..., Rb...), h0, c0.
  Case c;
  c.seq = c.batch = c.input = c.hidden = 1;
  c.x = {1.0f};
  c.w = {0.5f, -1.0f, 2.0f, 0.25f};
  c.r = {0.1f, 0.2f, 0.3f, 0.4f};
  c.b = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f};
  c.h0 = {0.5f};
  c.c0 = {2.0f};
  const auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const double i = sigmoid(0.5 + 0.1 * 0.5 + 0.01 + 0.05);
  const double o = sigmoid(-1.0 + 0.2 * 0.5 + 0.02 + 0.06);
  const double f = sigmoid(2.0 + 0.3 * 0.5 + 0.03 + 0.07);
  const double g = std::tanh(0.25 + 0.4 * 0.5 + 0.04 + 0.08);
  const double cell = f * 2.0 + i * g, h = o * std::tanh(cell);
  const auto got = run(lstm_model(c), {c.x});
  check_close(got[0], {h});
  check_close(got[1], {h});
  check_close(got[2], {cell});
  // The reference agrees with the hand computation (up to the float inputs' rounding).
  const Outputs want = reference(c);
  CHECK(want.y_h[0] == doctest::Approx(h).epsilon(1e-7));
  CHECK(want.y_c[0] == doctest::Approx(cell).epsilon(1e-7));
}

TEST_CASE("cpu LSTM: forward, reverse and bidirectional with B, initial states and sequence lengths") {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    CAPTURE(direction);
    check_case(full_case(direction));
  }
}

TEST_CASE("cpu LSTM: batch-major layout 1") {
  for (const char* direction : {"forward", "bidirectional"}) {
    CAPTURE(direction);
    check_case(full_case(direction, 1));
  }
}

TEST_CASE("cpu LSTM: peepholes, clip and input_forget") {
  Case c = full_case("bidirectional");
  c.p = values(static_cast<size_t>(2 * 3 * c.hidden), 7);
  c.clip = 0.3;
  check_case(c);
  c.input_forget = true;
  check_case(c);
  Case r = full_case("reverse");
  r.p = values(static_cast<size_t>(3 * r.hidden), 8);
  r.input_forget = true;
  check_case(r);
}

TEST_CASE("cpu LSTM: activations, per direction or shared, with alphas and betas in order") {
  Case c = full_case("forward");
  c.activations = {"Relu", "Tanh", "Relu"};
  check_case(c);
  c.activations = {"HardSigmoid", "LeakyRelu", "Affine"};
  c.alpha = {0.3, 0.1, 0.7};
  c.beta = {0.4, -0.2};
  check_case(c);
  // Names are case-insensitive; defaults apply when no alphas or betas are given.
  c.activations = {"hardsigmoid", "tanh", "LEAKYRELU"};
  c.alpha.clear();
  c.beta.clear();
  Case lower = c;
  lower.activations = {"HardSigmoid", "Tanh", "LeakyRelu"};
  const Outputs want = reference(lower);
  check_close(run(lstm_model(c), {c.x})[1], want.y_h);

  Case b = full_case("bidirectional");
  b.activations = {"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Relu", "Tanh"};
  b.alpha = {0.25};
  b.beta = {0.45};
  check_case(b);
  b.activations = {"Sigmoid", "Relu", "Tanh"};  // one list for both directions
  b.alpha.clear();
  b.beta.clear();
  check_case(b);
}

TEST_CASE("cpu LSTM: absent B, initial states and sequence lengths mean zeros and full length") {
  Case c = full_case("bidirectional");
  c.b.clear();
  c.h0.clear();
  c.c0.clear();
  c.lens.clear();
  check_case(c);
}

TEST_CASE("cpu LSTM: any of Y, Y_h, Y_c may be absent") {
  const Case c = full_case("bidirectional");
  const Outputs want = reference(c);
  // Y_h alone: Y is -1, Y_c dropped.
  auto got = run(lstm_model(c, {false, true, false}), {c.x});
  REQUIRE(got.size() == 1);
  check_close(got[0], want.y_h);
  // Y_c alone, and Y with Y_c.
  got = run(lstm_model(c, {false, false, true}), {c.x});
  REQUIRE(got.size() == 1);
  check_close(got[0], want.y_c);
  got = run(lstm_model(c, {true, false, true}), {c.x});
  REQUIRE(got.size() == 2);
  check_close(got[0], want.y);
  check_close(got[1], want.y_c);

  // Absent outputs survive the .hbm round trip.
  Model model = lstm_model(c, {false, true, false});
  model.platform = "nash";
  auto bytes = encode_hbm(model, "qflow test");
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  auto decoded = decode_hbm(*bytes);
  REQUIRE_MESSAGE(decoded.has_value(), decoded.message());
  CHECK(*decoded == model);
  check_close(run(*decoded, {c.x})[0], want.y_h);

  // At least one output; other CPU ops still need their first.
  Builder none;
  const int32_t x = none.input("x", c.x_shape());
  none.cpu("LSTM", {x, none.constant_f32("w", {2, 8, 3}, c.w), none.constant_f32("r", {2, 8, 2}, c.r)}, {-1, -1},
           {ints("hidden_size", {2}), strings("direction", {"bidirectional"})});
  CHECK(contains(validate(none.model).message(), "cpu.LSTM 'n0': has no outputs"));
  Builder relu;
  const int32_t rx = relu.input("x", {2});
  relu.cpu("Relu", {rx}, {-1, relu.output("y", {2})});
  CHECK(contains(validate(relu.model).message(), "output index -1 is out of range"));
  CHECK(cpu_op_supported("LSTM"));
  CHECK(cpu_op_output_optional("LSTM", 0));
  CHECK_FALSE(cpu_op_output_optional("Relu", 0));
  CHECK(cpu_op_output_optional("LayerNormalization", 1));
}

TEST_CASE("cpu LSTM: errors name what is wrong") {
  const Case good = full_case("forward");
  const auto error = [](const Case& c) { return run_error(lstm_model(c), {c.x}); };
  Case c = good;
  c.activations = {"Sigmoid", "Gelu", "Tanh"};
  CHECK(contains(error(c), "cpu.LSTM 'n0': unknown activation 'Gelu'"));
  c = good;
  c.activations = {"Sigmoid", "Tanh"};
  CHECK(contains(error(c), "activations has 2 names, expected 3"));
  c = good;
  c.direction = "sideways";
  CHECK(contains(error(c), "direction 'sideways' is not forward, reverse or bidirectional"));
  c = good;
  c.lens = {4, 5, 0};
  CHECK(contains(error(c), "sequence length 5 is outside [0, 4]"));
  c = good;
  c.clip = -1.0;
  CHECK(contains(error(c), "clip must not be negative"));
  c = good;
  c.layout = 2;
  CHECK(contains(error(c), "layout 2 is not 0 or 1"));

  // W for another hidden size, and hidden_size against R.
  Builder m;
  const int32_t x = m.input("x", good.x_shape());
  const int32_t w = m.constant_f32("w", {1, 4 * 3, 3}, values(36, 1));
  const int32_t r = m.constant_f32("r", {1, 8, 2}, good.r);
  m.cpu("LSTM", {x, w, r}, {m.output("y", good.y_shape())}, {ints("hidden_size", {2})});
  CHECK(contains(run_error(m.model, {good.x}), "W [1, 12, 3] and R [1, 8, 2] do not match the expected [1, 8, 3] and [1, 8, 2]"));
  Builder n;
  const int32_t nx = n.input("x", good.x_shape());
  n.cpu("LSTM", {nx, n.constant_f32("w", {1, 8, 3}, good.w), n.constant_f32("r", {1, 8, 2}, good.r)},
        {n.output("y", good.y_shape())}, {ints("hidden_size", {3})});
  CHECK(contains(run_error(n.model, {good.x}), "hidden_size 3 does not match R [1, 8, 2]"));
  // A declared output shape that the inputs do not give.
  Builder o;
  const int32_t ox = o.input("x", good.x_shape());
  o.cpu("LSTM", {ox, o.constant_f32("w", {1, 8, 3}, good.w), o.constant_f32("r", {1, 8, 2}, good.r)},
        {o.output("y", {4, 1, 3, 3})});
  CHECK(contains(run_error(o.model, {good.x}), "Y: produces shape [4, 1, 3, 2] but its output tensor declares [4, 1, 3, 3]"));
  // B of the wrong shape.
  Builder q;
  const int32_t qx = q.input("x", good.x_shape());
  q.cpu("LSTM", {qx, q.constant_f32("w", {1, 8, 3}, good.w), q.constant_f32("r", {1, 8, 2}, good.r),
                 q.constant_f32("b", {1, 8}, values(8, 4))},
        {q.output("y", good.y_shape())});
  CHECK(contains(run_error(q.model, {good.x}), "B has shape [1, 8], expected [1, 16]"));
}
