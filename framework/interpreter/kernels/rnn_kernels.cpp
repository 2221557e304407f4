// Recurrent kernels: RNN, GRU and LSTM (opsets 7 and 14), float32 and float64. Each direction
// runs its own time loop; every matrix product is one multiply-add chain per element in a
// fixed order, so the results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/sgemm.h"
#include "qflow/runtime/recurrent.h"

namespace qflow {
namespace {

enum class Cell { Rnn, Gru, Lstm };

// Gates per hidden unit, in the order W, R and B stack them: RNN i, GRU zrh, LSTM iofc.
int64_t gate_count(Cell cell) { return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4; }
// Activations per direction: RNN f, GRU f g, LSTM f g h.
std::size_t activations_per_direction(Cell cell) { return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3; }

bool wants_output(const KernelContext& context, std::size_t i) {
  return i < context.outputs.size() && context.node.output(i) != nullptr;
}

using rnn::Activation;
using rnn::ActivationSpec;
using RnnDims = rnn::Dims;
using rnn::find_activation;

// Configuration read from the node's attributes -----------------------------------------------

struct RnnConfig {
  Cell cell = Cell::Rnn;
  int64_t directions = 1;
  bool reverse = false;       // a single direction running from the last step back
  int64_t hidden_size = -1;   // -1 when the attribute is absent (R's shape then decides)
  int64_t layout = 0;         // 1: batch-major X, initial states and outputs (opset 14)
  std::vector<Activation> activations;  // activations_per_direction(cell) per direction
  std::optional<float> clip;  // bound applied to every gate's input before its activation
  bool input_forget = false;  // LSTM: forget gate = 1 - input gate
  bool linear_before_reset = false;  // GRU: reset gate applied after the recurrent product
};

Expected<std::vector<Activation>> read_activations(const Node& node, Cell cell, int64_t directions) {
  const std::size_t per_direction = activations_per_direction(cell);
  std::vector<std::string> names;
  if (const Attribute* a = node.find_attribute("activations")) names = a->strings;
  if (names.empty()) {
    names = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
            : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  }
  const std::size_t total = per_direction * static_cast<std::size_t>(directions);
  if (names.size() != per_direction && names.size() != total)
    return invalid_input("activations has " + std::to_string(names.size()) + " names, expected " +
                         std::to_string(total));
  // Values are consumed in the order of the activations that take them.
  const std::vector<float> alphas = node.attr_floats("activation_alpha");
  const std::vector<float> betas = node.attr_floats("activation_beta");
  std::size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationSpec* spec = find_activation(name);
    if (!spec) return invalid_input("unknown activation '" + name + "'");
    Activation activation{spec->kind, spec->alpha, spec->beta};
    if (spec->uses_alpha && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (spec->uses_beta && next_beta < betas.size()) activation.beta = betas[next_beta++];
    out.push_back(activation);
  }
  // One direction's list serves both directions of a bidirectional node, as ONNX Runtime reads it.
  if (out.size() != total) {
    const std::vector<Activation> one_direction = out;  // inserting a vector into itself is undefined
    out.insert(out.end(), one_direction.begin(), one_direction.end());
  }
  return out;
}

Expected<RnnConfig> read_config(const Node& node, int64_t opset, Cell cell) {
  RnnConfig config;
  config.cell = cell;
  const std::string direction = node.attr_string("direction", "forward");
  if (direction == "bidirectional") {
    config.directions = 2;
  } else if (direction == "reverse") {
    config.reverse = true;
  } else if (direction != "forward") {
    return invalid_input("direction '" + direction + "' is not forward, reverse or bidirectional");
  }
  if (node.find_attribute("hidden_size")) {
    config.hidden_size = node.attr_int("hidden_size", -1);
    if (config.hidden_size <= 0) return invalid_input("hidden_size must be positive");
  }
  if (opset >= 14) config.layout = node.attr_int("layout", 0);
  if (config.layout != 0 && config.layout != 1)
    return invalid_input("layout " + std::to_string(config.layout) + " is not 0 or 1");
  QFLOW_ASSIGN_OR_RETURN(config.activations, read_activations(node, cell, config.directions));
  if (node.find_attribute("clip")) {
    config.clip = node.attr_float("clip", 0.0f);
    if (!(*config.clip >= 0.0f)) return invalid_input("clip must not be negative");
  }
  config.input_forget = cell == Cell::Lstm && node.attr_int("input_forget", 0) != 0;
  config.linear_before_reset = cell == Cell::Gru && node.attr_int("linear_before_reset", 0) != 0;
  return config;
}

// Products ----------------------------------------------------------------------------------

// The factor W^T of the products X·W^T and H·R^T, for a row-major [n x k] W: float32 packed
// once for sgemm (and reused at every time step), float64 read in place. Each element of a
// product is one multiply-add chain over k in increasing order.
template <typename T>
class TransposedWeights {
 public:
  TransposedWeights(const T* w, int64_t n, int64_t k) : w_(w), n_(n), k_(k) {
    if constexpr (std::is_same_v<T, float>)
      if (n > 0 && k > 0) packed_ = sgemm_pack_b(k, n, SgemmOperand{w, 1, k});
  }

  // c[m x n] (row pitch ldc) = a[m x k] (row pitch lda) · W^T.
  void multiply(int64_t m, const T* a, int64_t lda, T* c, int64_t ldc) const {
    if (m == 0 || n_ == 0) return;
    if (k_ == 0) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n_, T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      sgemm(m, SgemmOperand{a, lda, 1}, packed_, c, ldc);
    } else {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n_; ++j) {
          T sum = 0;
          for (int64_t p = 0; p < k_; ++p) sum += a[i * lda + p] * w_[j * k_ + p];
          c[i * ldc + j] = sum;
        }
    }
  }

 private:
  const T* w_;
  int64_t n_, k_;
  SgemmPackedB packed_;
};

// Everything one direction reads and writes; output pointers are null when not wanted.
template <typename T>
struct RnnProblem {
  const RnnConfig* config = nullptr;
  RnnDims dims;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* r = nullptr;
  const T* bias = nullptr;       // [directions, 2 * gates * hidden] or null
  const T* peephole = nullptr;   // [directions, 3 * hidden] or null
  const T* initial_h = nullptr;  // state layout, or null for zeros
  const T* initial_c = nullptr;
  std::vector<int64_t> lengths;  // per batch entry
  T* y = nullptr;                // zero-filled: steps past a sequence's end stay zero
  T* y_h = nullptr;
  T* y_c = nullptr;
};

template <typename T>
T clipped(const RnnConfig& config, T v) {
  if (!config.clip) return v;
  const T bound = static_cast<T>(*config.clip);
  return activation::clip(v, -bound, bound);
}

// Runs direction d over every sequence of the batch.
template <typename T>
void run_direction(const RnnProblem<T>& p, int64_t d) {
  const RnnConfig& config = *p.config;
  const RnnDims& dims = p.dims;
  const int64_t hidden = dims.hidden, batch = dims.batch;
  const int64_t gates = gate_count(config.cell), width = gates * hidden;
  const bool reverse = config.reverse || d == 1;
  const Activation* act =
      config.activations.data() + static_cast<std::size_t>(d) * activations_per_direction(config.cell);

  // X·W^T for all steps at once: the one product that does not wait for the previous step.
  std::vector<T> xw(static_cast<std::size_t>(dims.seq * batch * width));
  TransposedWeights<T>(p.w + d * width * dims.input, width, dims.input)
      .multiply(dims.seq * batch, p.x, dims.input, xw.data(), width);

  std::vector<T> wb(static_cast<std::size_t>(width), T(0)), rb(wb), bias_sum(wb);
  if (p.bias) {
    const T* b = p.bias + d * 2 * width;
    std::copy(b, b + width, wb.begin());
    std::copy(b + width, b + 2 * width, rb.begin());
  }
  for (std::size_t j = 0; j < bias_sum.size(); ++j) bias_sum[j] = wb[j] + rb[j];
  const T* peep = p.peephole ? p.peephole + d * 3 * hidden : nullptr;

  std::vector<T> h(static_cast<std::size_t>(batch * hidden), T(0)), c(h);
  for (int64_t b = 0; b < batch; ++b) {
    if (p.initial_h) std::copy_n(p.initial_h + dims.state_offset(d, b), hidden, h.data() + b * hidden);
    if (p.initial_c) std::copy_n(p.initial_c + dims.state_offset(d, b), hidden, c.data() + b * hidden);
  }

  // GRU without linear_before_reset multiplies r (.) H by Rh, so Rh waits for the z and r gates.
  const T* r = p.r + d * width * hidden;
  const bool split_gru = config.cell == Cell::Gru && !config.linear_before_reset;
  const int64_t recurrent_width = split_gru ? 2 * hidden : width;
  const TransposedWeights<T> recurrent(r, recurrent_width, hidden);
  std::optional<TransposedWeights<T>> candidate_recurrent;
  if (split_gru) candidate_recurrent.emplace(r + 2 * hidden * hidden, hidden, hidden);
  std::vector<T> hr(static_cast<std::size_t>(batch * recurrent_width));
  std::vector<T> reset_h(split_gru ? h.size() : 0), candidate(reset_h.size());

  const int64_t steps = p.lengths.empty() ? 0 : *std::max_element(p.lengths.begin(), p.lengths.end());
  // Step s of entry b is time t = s forward, len - 1 - s in reverse; past its length an entry
  // keeps its state, so the final state is the last valid step's (the initial state when the
  // length is zero).
  auto time_of = [&](int64_t s, int64_t b) { return reverse ? p.lengths[static_cast<std::size_t>(b)] - 1 - s : s; };
  auto active = [&](int64_t s, int64_t b) { return s < p.lengths[static_cast<std::size_t>(b)]; };

  for (int64_t s = 0; s < steps; ++s) {
    recurrent.multiply(batch, h.data(), hidden, hr.data(), recurrent_width);
    if (split_gru) {
      for (int64_t b = 0; b < batch; ++b) {
        if (!active(s, b)) continue;
        const T* gx = xw.data() + dims.x_row(time_of(s, b), b) * width;
        T* gh = hr.data() + b * recurrent_width;
        const T* hb = h.data() + b * hidden;
        for (int64_t j = 0; j < 2 * hidden; ++j)
          gh[j] = act[0](clipped(config, gx[j] + gh[j] + bias_sum[static_cast<std::size_t>(j)]));
        for (int64_t j = 0; j < hidden; ++j) reset_h[static_cast<std::size_t>(b * hidden + j)] = gh[hidden + j] * hb[j];
      }
      candidate_recurrent->multiply(batch, reset_h.data(), hidden, candidate.data(), hidden);
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (!active(s, b)) continue;
      const int64_t t = time_of(s, b);
      const T* gx = xw.data() + dims.x_row(t, b) * width;
      const T* gh = hr.data() + b * recurrent_width;
      T* hb = h.data() + b * hidden;
      T* cb = c.data() + b * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const auto bias_of = [&](int64_t gate) { return bias_sum[static_cast<std::size_t>(gate * hidden + j)]; };
        switch (config.cell) {
          case Cell::Rnn:
            hb[j] = act[0](clipped(config, gx[j] + gh[j] + bias_of(0)));
            break;
          case Cell::Gru: {
            const int64_t hj = 2 * hidden + j;
            T z, pre;
            if (split_gru) {
              z = gh[j];
              pre = gx[hj] + candidate[static_cast<std::size_t>(b * hidden + j)] + bias_of(2);
            } else {
              z = act[0](clipped(config, gx[j] + gh[j] + bias_of(0)));
              const T reset = act[0](clipped(config, gx[hidden + j] + gh[hidden + j] + bias_of(1)));
              pre = gx[hj] + wb[static_cast<std::size_t>(hj)] + reset * (gh[hj] + rb[static_cast<std::size_t>(hj)]);
            }
            const T candidate_h = act[1](clipped(config, pre));
            hb[j] = (T(1) - z) * candidate_h + z * hb[j];
            break;
          }
          case Cell::Lstm: {
            // W, R and B stack the gates as i, o, f, c; P holds i, o, f.
            T pre_i = gx[j] + gh[j] + bias_of(0);
            T pre_f = gx[2 * hidden + j] + gh[2 * hidden + j] + bias_of(2);
            if (peep) {
              pre_i += peep[j] * cb[j];
              pre_f += peep[2 * hidden + j] * cb[j];
            }
            const T in_gate = act[0](clipped(config, pre_i));
            const T forget = config.input_forget ? T(1) - in_gate : act[0](clipped(config, pre_f));
            const T cell_in = act[1](clipped(config, gx[3 * hidden + j] + gh[3 * hidden + j] + bias_of(3)));
            cb[j] = forget * cb[j] + in_gate * cell_in;
            T pre_o = gx[hidden + j] + gh[hidden + j] + bias_of(1);
            if (peep) pre_o += peep[hidden + j] * cb[j];
            hb[j] = act[0](clipped(config, pre_o)) * act[2](cb[j]);
            break;
          }
        }
      }
      if (p.y) std::copy_n(hb, hidden, p.y + dims.y_offset(t, d, b));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (p.y_h) std::copy_n(h.data() + b * hidden, hidden, p.y_h + dims.state_offset(d, b));
    if (p.y_c) std::copy_n(c.data() + b * hidden, hidden, p.y_c + dims.state_offset(d, b));
  }
}

// Validation and dispatch ---------------------------------------------------------------------

// An error unless input i is absent or has the given shape and X's element type.
Status check_optional(const KernelContext& context, std::size_t i, const char* name, const Shape& shape, DType dtype) {
  const Tensor* t = context.input(i);
  if (!t) return Status::ok();
  if (t->dtype() != dtype)
    return context.error(std::string(name) + " has type " + std::string(dtype_name(t->dtype())) + ", expected " +
                         std::string(dtype_name(dtype)));
  if (t->shape() != shape)
    return context.error(std::string(name) + " has shape " + shape_to_string(t->shape()) + ", expected " +
                         shape_to_string(shape));
  return Status::ok();
}

Expected<RnnDims> check_inputs(const KernelContext& context, const RnnConfig& config) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* r, context.required_input(2));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() != 3 || w->rank() != 3 || r->rank() != 3)
    return context.error("X, W and R must have rank 3, got " + shape_to_string(x->shape()) + ", " +
                         shape_to_string(w->shape()) + " and " + shape_to_string(r->shape()));
  if (w->dtype() != x->dtype() || r->dtype() != x->dtype()) return context.error("W and R must have X's element type");
  RnnDims dims;
  dims.layout = config.layout;
  dims.directions = config.directions;
  dims.seq = x->dim(config.layout == 0 ? 0 : 1);
  dims.batch = x->dim(config.layout == 0 ? 1 : 0);
  dims.input = x->dim(2);
  dims.hidden = config.hidden_size >= 0 ? config.hidden_size : r->dim(2);
  const int64_t width = gate_count(config.cell) * dims.hidden;
  const Shape w_shape{dims.directions, width, dims.input}, r_shape{dims.directions, width, dims.hidden};
  if (w->shape() != w_shape || r->shape() != r_shape)
    return context.error("W " + shape_to_string(w->shape()) + " and R " + shape_to_string(r->shape()) +
                         " do not match the expected " + shape_to_string(w_shape) + " and " + shape_to_string(r_shape));
  QFLOW_RETURN_IF_ERROR(check_optional(context, 3, "B", {dims.directions, 2 * width}, x->dtype()));
  if (const Tensor* lens = context.input(4)) {
    if (lens->dtype() != DType::Int32 && lens->dtype() != DType::Int64)
      return context.error("sequence_lens must hold integers, got " + std::string(dtype_name(lens->dtype())));
    if (lens->shape() != Shape{dims.batch})
      return context.error("sequence_lens has shape " + shape_to_string(lens->shape()) + ", expected [" +
                           std::to_string(dims.batch) + "]");
    for (int64_t len : lens->to_int64s())
      if (len < 0 || len > dims.seq)
        return context.error("sequence length " + std::to_string(len) + " is outside [0, " + std::to_string(dims.seq) +
                             "]");
  }
  QFLOW_RETURN_IF_ERROR(check_optional(context, 5, "initial_h", dims.state_shape(), x->dtype()));
  if (config.cell == Cell::Lstm) {
    QFLOW_RETURN_IF_ERROR(check_optional(context, 6, "initial_c", dims.state_shape(), x->dtype()));
    QFLOW_RETURN_IF_ERROR(check_optional(context, 7, "P", {dims.directions, 3 * dims.hidden}, x->dtype()));
  }
  return dims;
}

template <typename T>
Status run_typed(KernelContext& context, const RnnConfig& config, const RnnDims& dims) {
  RnnProblem<T> p;
  p.config = &config;
  p.dims = dims;
  p.x = context.input(0)->data<T>();
  p.w = context.input(1)->data<T>();
  p.r = context.input(2)->data<T>();
  const auto optional_data = [&](std::size_t i) -> const T* {
    const Tensor* t = context.input(i);
    return t ? t->data<T>() : nullptr;
  };
  p.bias = optional_data(3);
  p.initial_h = optional_data(5);
  if (config.cell == Cell::Lstm) {
    p.initial_c = optional_data(6);
    p.peephole = optional_data(7);
  }
  p.lengths = context.input(4) ? context.input(4)->to_int64s()
                               : std::vector<int64_t>(static_cast<std::size_t>(dims.batch), dims.seq);
  Tensor y, y_h, y_c;
  if (wants_output(context, 0)) {
    y = Tensor(context.input(0)->dtype(), dims.y_shape());
    p.y = y.data<T>();
  }
  if (wants_output(context, 1)) {
    y_h = Tensor(context.input(0)->dtype(), dims.state_shape());
    p.y_h = y_h.data<T>();
  }
  if (config.cell == Cell::Lstm && wants_output(context, 2)) {
    y_c = Tensor(context.input(0)->dtype(), dims.state_shape());
    p.y_c = y_c.data<T>();
  }
  // The directions write disjoint parts of the outputs.
  context.parallel_for(dims.directions, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) run_direction(p, d);
  });
  if (p.y) context.outputs[0] = std::move(y);
  if (p.y_h) context.outputs[1] = std::move(y_h);
  if (p.y_c) context.outputs[2] = std::move(y_c);
  return Status::ok();
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(RnnConfig config) : config_(std::move(config)) {}
  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const RnnDims dims, check_inputs(context, config_));
    return dispatch_float(context.input(0)->dtype(),
                          [&]<typename T>() { return run_typed<T>(context, config_, dims); });
  }

 private:
  RnnConfig config_;
};

// Attributes are read and checked once, when the node's kernel is created.
KernelFactory recurrent_kernel(Cell cell) {
  return [cell](const Node& node, int64_t opset,
                const std::vector<const Tensor*>&) -> Expected<std::unique_ptr<Kernel>> {
    auto config = read_config(node, opset, cell);
    if (!config) return invalid_input(node.op_type() + " '" + node.name() + "': " + config.status().message());
    return std::unique_ptr<Kernel>(new RecurrentKernel(std::move(*config)));
  };
}

}  // namespace

void register_rnn_kernels(KernelRegistry& registry) {
  registry.add("", "RNN", 7, kLatestOpset, recurrent_kernel(Cell::Rnn));
  registry.add("", "GRU", 7, kLatestOpset, recurrent_kernel(Cell::Gru));
  registry.add("", "LSTM", 7, kLatestOpset, recurrent_kernel(Cell::Lstm));
}

}  // namespace qflow
