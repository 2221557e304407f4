// cpu.LSTM: ONNX LSTM (opsets 7 and 14) on f32 tensors. The arithmetic is the interpreter's
// (framework/interpreter/kernels/rnn_kernels.cpp) step for step: each product X·W^T and H·R^T is
// one float multiply-add chain per element in increasing order, the two biases are summed
// before they join a gate, and the activations use the same formulas. A CPU segment and the
// interpreter then agree to rounding (the interpreter's products may use fused multiply-adds).
#include "lowered/cpu_rnn.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lowered/op_common.h"
#include "qflow/runtime/recurrent.h"

namespace qflow::lowered::detail {
namespace {

Status err(std::string message) { return invalid_input(std::move(message)); }

// Gates per hidden unit, stacked in W, R and B in the order i, o, f, c.
constexpr int64_t kGates = 4;
// Activations per direction: f (the gates), g (the cell input), h (the cell output).
constexpr size_t kActivations = 3;

using rnn::Activation;
using rnn::ActivationSpec;
using rnn::Dims;
using rnn::find_activation;

// Configuration from the attributes ---------------------------------------------------------

struct Config {
  int64_t directions = 1;
  bool reverse = false;       // a single direction running from the last step back
  int64_t hidden_size = -1;   // -1 when the attribute is absent (R's shape then decides)
  int64_t layout = 0;         // 1: batch-major X, initial states and outputs (opset 14)
  std::vector<Activation> activations;  // kActivations per direction
  bool has_clip = false;      // clip bounds every gate's input before its activation
  float clip = 0.0f;
  bool input_forget = false;  // forget gate = 1 - input gate
};

Status read_activations(const Op& op, Config& config) {
  std::vector<std::string> names;
  if (const Attribute* a = find_attribute(op, "activations")) names = a->strings;
  if (names.empty()) names = {"Sigmoid", "Tanh", "Tanh"};
  const size_t total = kActivations * static_cast<size_t>(config.directions);
  if (names.size() != kActivations && names.size() != total)
    return err("activations has " + std::to_string(names.size()) + " names, expected " + std::to_string(total));
  // Values are consumed in the order of the activations that take them.
  std::vector<double> alphas, betas;
  if (const Attribute* a = find_attribute(op, "activation_alpha")) alphas = a->floats;
  if (const Attribute* a = find_attribute(op, "activation_beta")) betas = a->floats;
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActivationSpec* spec = find_activation(name);
    if (!spec)
      return err("unknown activation " + quoted_name(name) +
                 " (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                 "Softsign, Softplus)");
    Activation activation{spec->kind, spec->alpha, spec->beta};
    if (spec->uses_alpha && next_alpha < alphas.size()) activation.alpha = static_cast<float>(alphas[next_alpha++]);
    if (spec->uses_beta && next_beta < betas.size()) activation.beta = static_cast<float>(betas[next_beta++]);
    config.activations.push_back(activation);
  }
  // One direction's list serves both directions of a bidirectional op, as ONNX Runtime reads it.
  for (size_t k = config.activations.size(); k < total; ++k) config.activations.push_back(config.activations[k - kActivations]);
  return Status::ok();
}

Status read_config(const Op& op, Config& config) {
  const std::string direction = string_or(op, "direction", "forward");
  if (direction == "bidirectional") config.directions = 2;
  else if (direction == "reverse") config.reverse = true;
  else if (direction != "forward") return err("direction " + quoted_name(direction) + " is not forward, reverse or bidirectional");
  if (find_attribute(op, "hidden_size")) {
    config.hidden_size = int_or(op, "hidden_size", -1);
    if (config.hidden_size <= 0) return err("hidden_size must be positive");
  }
  config.layout = int_or(op, "layout", 0);
  if (config.layout != 0 && config.layout != 1) return err("layout " + std::to_string(config.layout) + " is not 0 or 1");
  if (Status s = read_activations(op, config); !s) return s;
  if (find_attribute(op, "clip")) {
    config.has_clip = true;
    config.clip = static_cast<float>(float_or(op, "clip", 0.0));
    if (!(config.clip >= 0.0f)) return err("clip must not be negative");
  }
  config.input_forget = int_or(op, "input_forget", 0) != 0;
  return Status::ok();
}

// Shapes ------------------------------------------------------------------------------------

// An error unless `v` is absent or an f32 tensor of `shape`.
Status check_optional(const Value* v, const char* name, const Shape& shape) {
  if (!v) return Status::ok();
  if (v->type != ElemType::f32) return err(std::string(name) + " must be an f32 tensor");
  if (v->shape != shape)
    return err(std::string(name) + " has shape " + shape_string(v->shape) + ", expected " + shape_string(shape));
  return Status::ok();
}

// An error unless the output `v` is absent or declares `shape`.
Status check_output(const Value* v, const char* name, const Shape& shape) {
  if (!v || v->shape == shape) return Status::ok();
  return err(std::string(name) + ": produces shape " + shape_string(shape) + " but its output tensor declares " +
             shape_string(v->shape));
}

// The computation ---------------------------------------------------------------------------

// Everything one direction reads and writes; output pointers are null when not wanted.
struct Problem {
  const Config* config = nullptr;
  Dims dims;
  const float* x = nullptr;
  const float* w = nullptr;
  const float* r = nullptr;
  const float* bias = nullptr;       // [directions, 2 * 4 * hidden] or null
  const float* peephole = nullptr;   // [directions, 3 * hidden] or null
  const float* initial_h = nullptr;  // state layout, or null for zeros
  const float* initial_c = nullptr;
  std::vector<int64_t> lengths;      // per batch entry
  float* y = nullptr;                // zero-filled: steps past a sequence's end stay zero
  float* y_h = nullptr;
  float* y_c = nullptr;
};

// c[m x n] (row pitch ldc) = a[m x k] (row pitch lda) · w^T for a row-major [n x k] w: each
// element one multiply-add chain over k in increasing order, as the interpreter's sgemm.
void multiply_transposed(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* w, float* c,
                         int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* row = a + i * lda;
      const float* col = w + j * k;
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += row[p] * col[p];
      c[i * ldc + j] = sum;
    }
}

float clipped(const Config& config, float v) {
  return config.has_clip ? std::min(std::max(v, -config.clip), config.clip) : v;
}

// Runs direction d over every sequence of the batch.
void run_direction(const Problem& p, int64_t d) {
  const Config& config = *p.config;
  const Dims& dims = p.dims;
  const int64_t hidden = dims.hidden, batch = dims.batch, width = kGates * hidden;
  const bool reverse = config.reverse || d == 1;
  const Activation* act = config.activations.data() + static_cast<size_t>(d) * kActivations;

  // X·W^T for all steps at once: the one product that does not wait for the previous step.
  std::vector<float> xw(static_cast<size_t>(dims.seq * batch * width));
  multiply_transposed(dims.seq * batch, width, dims.input, p.x, dims.input, p.w + d * width * dims.input, xw.data(),
                      width);

  std::vector<float> bias_sum(static_cast<size_t>(width), 0.0f);
  if (p.bias) {
    const float* wb = p.bias + d * 2 * width;
    const float* rb = wb + width;
    for (int64_t j = 0; j < width; ++j) bias_sum[static_cast<size_t>(j)] = wb[j] + rb[j];
  }
  const float* peep = p.peephole ? p.peephole + d * 3 * hidden : nullptr;

  std::vector<float> h(static_cast<size_t>(batch * hidden), 0.0f), c(h);
  for (int64_t b = 0; b < batch; ++b) {
    if (p.initial_h) std::copy_n(p.initial_h + dims.state_offset(d, b), hidden, h.data() + b * hidden);
    if (p.initial_c) std::copy_n(p.initial_c + dims.state_offset(d, b), hidden, c.data() + b * hidden);
  }

  const float* r = p.r + d * width * hidden;
  std::vector<float> hr(static_cast<size_t>(batch * width));
  const int64_t steps = p.lengths.empty() ? 0 : *std::max_element(p.lengths.begin(), p.lengths.end());
  // Step s of entry b is time t = s forward, len - 1 - s in reverse; past its length an entry
  // keeps its state, so the final state is the last valid step's (the initial state when the
  // length is zero).
  const auto length = [&](int64_t b) { return p.lengths[static_cast<size_t>(b)]; };
  for (int64_t s = 0; s < steps; ++s) {
    multiply_transposed(batch, width, hidden, h.data(), hidden, r, hr.data(), width);
    for (int64_t b = 0; b < batch; ++b) {
      if (s >= length(b)) continue;
      const int64_t t = reverse ? length(b) - 1 - s : s;
      const float* gx = xw.data() + dims.x_row(t, b) * width;
      const float* gh = hr.data() + b * width;
      float* hb = h.data() + b * hidden;
      float* cb = c.data() + b * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const auto bias_of = [&](int64_t gate) { return bias_sum[static_cast<size_t>(gate * hidden + j)]; };
        // W, R and B stack the gates as i, o, f, c; P holds i, o, f.
        float pre_i = gx[j] + gh[j] + bias_of(0);
        float pre_f = gx[2 * hidden + j] + gh[2 * hidden + j] + bias_of(2);
        if (peep) {
          pre_i += peep[j] * cb[j];
          pre_f += peep[2 * hidden + j] * cb[j];
        }
        const float in_gate = act[0](clipped(config, pre_i));
        const float forget = config.input_forget ? 1.0f - in_gate : act[0](clipped(config, pre_f));
        const float cell_in = act[1](clipped(config, gx[3 * hidden + j] + gh[3 * hidden + j] + bias_of(3)));
        cb[j] = forget * cb[j] + in_gate * cell_in;
        float pre_o = gx[hidden + j] + gh[hidden + j] + bias_of(1);
        if (peep) pre_o += peep[hidden + j] * cb[j];
        hb[j] = act[0](clipped(config, pre_o)) * act[2](cb[j]);
      }
      if (p.y) std::copy_n(hb, hidden, p.y + dims.y_offset(t, d, b));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (p.y_h) std::copy_n(h.data() + b * hidden, hidden, p.y_h + dims.state_offset(d, b));
    if (p.y_c) std::copy_n(c.data() + b * hidden, hidden, p.y_c + dims.state_offset(d, b));
  }
}

}  // namespace

Status run_lstm(const Op& op, const std::vector<const Value*>& ins, const std::vector<Value*>& outs) {
  if (ins.size() < 3 || ins.size() > 8) return err("has " + std::to_string(ins.size()) + " inputs, expected 3 to 8");
  if (outs.empty() || outs.size() > 3) return err("has " + std::to_string(outs.size()) + " outputs, expected 1 to 3");
  const auto in = [&](size_t i) -> const Value* { return i < ins.size() ? ins[i] : nullptr; };
  const auto out = [&](size_t i) -> Value* { return i < outs.size() ? outs[i] : nullptr; };
  if (!out(0) && !out(1) && !out(2)) return err("has none of the outputs Y, Y_h, Y_c");
  const Value* x = in(0);
  const Value* w = in(1);
  const Value* r = in(2);
  if (!x || !w || !r) return err("X, W and R are required");
  if (x->type != ElemType::f32 || w->type != ElemType::f32 || r->type != ElemType::f32)
    return err("X, W and R must be f32 tensors");
  if (x->shape.size() != 3 || w->shape.size() != 3 || r->shape.size() != 3)
    return err("X, W and R must have rank 3, got " + shape_string(x->shape) + ", " + shape_string(w->shape) + " and " +
               shape_string(r->shape));
  Config config;
  if (Status s = read_config(op, config); !s) return s;

  Dims dims;
  dims.layout = config.layout;
  dims.directions = config.directions;
  dims.seq = x->shape[config.layout == 0 ? 0 : 1];
  dims.batch = x->shape[config.layout == 0 ? 1 : 0];
  dims.input = x->shape[2];
  dims.hidden = r->shape[2];
  if (config.hidden_size >= 0 && config.hidden_size != dims.hidden)
    return err("hidden_size " + std::to_string(config.hidden_size) + " does not match R " + shape_string(r->shape));
  const int64_t width = kGates * dims.hidden;
  // The gate inputs of every step, X·W^T, are held at once.
  if (element_count({dims.seq, dims.batch, std::max<int64_t>(width, 1)}) < 0)
    return err("X " + shape_string(x->shape) + " has 2^40 or more gate inputs");
  const Shape w_shape{dims.directions, width, dims.input}, r_shape{dims.directions, width, dims.hidden};
  if (w->shape != w_shape || r->shape != r_shape)
    return err("W " + shape_string(w->shape) + " and R " + shape_string(r->shape) + " do not match the expected " +
               shape_string(w_shape) + " and " + shape_string(r_shape));
  if (Status s = check_optional(in(3), "B", {dims.directions, 2 * width}); !s) return s;
  if (Status s = check_optional(in(5), "initial_h", dims.state_shape()); !s) return s;
  if (Status s = check_optional(in(6), "initial_c", dims.state_shape()); !s) return s;
  if (Status s = check_optional(in(7), "P", {dims.directions, 3 * dims.hidden}); !s) return s;

  Problem p;
  p.config = &config;
  p.dims = dims;
  if (const Value* lens = in(4)) {
    if (lens->type != ElemType::i64) return err("sequence_lens must be an i64 tensor");
    if (lens->shape != Shape{dims.batch})
      return err("sequence_lens has shape " + shape_string(lens->shape) + ", expected [" + std::to_string(dims.batch) + "]");
    for (const int64_t len : lens->longs)
      if (len < 0 || len > dims.seq)
        return err("sequence length " + std::to_string(len) + " is outside [0, " + std::to_string(dims.seq) + "]");
    p.lengths = lens->longs;
  } else {
    p.lengths.assign(static_cast<size_t>(dims.batch), dims.seq);
  }

  const char* names[] = {"Y", "Y_h", "Y_c"};
  const Shape shapes[] = {dims.y_shape(), dims.state_shape(), dims.state_shape()};
  for (size_t k = 0; k < 3; ++k) {
    if (out(k) && out(k)->type != ElemType::f32) return err(std::string(names[k]) + " must be an f32 tensor");
    if (Status s = check_output(out(k), names[k], shapes[k]); !s) return s;
  }

  const auto data = [](const Value* v) { return v ? v->floats.data() : nullptr; };
  p.x = x->floats.data();
  p.w = w->floats.data();
  p.r = r->floats.data();
  p.bias = data(in(3));
  p.initial_h = data(in(5));
  p.initial_c = data(in(6));
  p.peephole = data(in(7));
  if (Value* y = out(0)) {
    std::fill(y->floats.begin(), y->floats.end(), 0.0f);
    p.y = y->floats.data();
  }
  if (Value* y_h = out(1)) p.y_h = y_h->floats.data();
  if (Value* y_c = out(2)) p.y_c = y_c->floats.data();
  // Without hidden units every output is empty, however long the sequences.
  if (dims.hidden > 0)
    for (int64_t d = 0; d < dims.directions; ++d) run_direction(p, d);
  return Status::ok();
}

}  // namespace qflow::lowered::detail
