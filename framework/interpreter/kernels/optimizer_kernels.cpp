// The training optimizers of ai.onnx.preview.training (Adagrad, Momentum, Adam): one update
// step of every tensor group they are given, as the operators define it. Inputs are R (the
// learning rate) and T (the update count), then the groups' tensors, one list per role.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernels/bound_kernel.h"

namespace qflow {
namespace {

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

// R and T, and the group count of `roles` tensor lists after them.
struct Step {
  double rate = 0.0;
  int64_t count = 0;
  std::size_t groups = 0;
};

Expected<Step> read_step(const KernelContext& context, std::size_t roles) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* r, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* t, context.required_input(1));
  if (r->numel() != 1 || t->numel() != 1) return context.error("R and T must hold one value each");
  const std::size_t tensors = context.input_count() - 2;
  if (context.input_count() < 2 || tensors == 0 || tensors % roles != 0)
    return context.error("expected R, T and " + std::to_string(roles) + " lists of equal length, got " +
                         std::to_string(context.input_count()) + " inputs");
  Step step{r->to_doubles()[0], t->to_int64s()[0], tensors / roles};
  if (context.outputs.size() != step.groups * (roles - 1))
    return context.error("expected " + std::to_string(step.groups * (roles - 1)) + " outputs, the node has " +
                         std::to_string(context.outputs.size()));
  return step;
}

// The `roles` tensors of group `g` (X first, then its gradient and state), checked: float or
// double, all of X's type and shape.
Expected<std::vector<const Tensor*>> group_inputs(const KernelContext& context, const Step& step, std::size_t roles,
                                                  std::size_t g) {
  std::vector<const Tensor*> tensors;
  for (std::size_t role = 0; role < roles; ++role) {
    const std::size_t index = 2 + role * step.groups + g;
    QFLOW_ASSIGN_OR_RETURN(const Tensor* t, context.required_input(index));
    if (t->dtype() != DType::Float32 && t->dtype() != DType::Float64)
      return context.error("input " + std::to_string(index) + " must be float or double");
    if (!tensors.empty() && (t->shape() != tensors[0]->shape() || t->dtype() != tensors[0]->dtype()))
      return context.error("the tensors of group " + std::to_string(g) + " differ in type or shape");
    tensors.push_back(t);
  }
  return tensors;
}

// Element i of a float or double tensor, in double; and the store back.
double at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::Float64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}
void set(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::Float64) t.data<double>()[i] = v;
  else t.data<float>()[i] = static_cast<float>(v);
}

// One step over every group of `roles` inputs: `update(in, out)` maps the roles' values at an
// element (in double) to the new X and states, roles - 1 of them, which become the outputs
// in the operators' order (every new X, then every state of the first kind, ...).
template <std::size_t Roles, typename Update>
Status update_groups(KernelContext& context, const Step& step, const Update& update) {
  for (std::size_t g = 0; g < step.groups; ++g) {
    QFLOW_ASSIGN_OR_RETURN(const auto in, group_inputs(context, step, Roles, g));
    std::vector<Tensor> out;
    for (std::size_t r = 0; r + 1 < Roles; ++r) out.emplace_back(in[0]->dtype(), in[0]->shape());
    std::array<double, Roles> values{};
    std::array<double, Roles - 1> results{};
    for (int64_t i = 0; i < in[0]->numel(); ++i) {
      for (std::size_t r = 0; r < Roles; ++r) values[r] = at(*in[r], i);
      update(values, results);
      for (std::size_t r = 0; r + 1 < Roles; ++r) set(out[r], i, results[r]);
    }
    for (std::size_t r = 0; r + 1 < Roles; ++r) context.outputs[r * step.groups + g] = std::move(out[r]);
  }
  return Status::ok();
}

KernelFunction bind_adagrad(const Node& node, int64_t) {
  const double decay = node.attr_float("decay_factor", 0.0f);
  const double epsilon = node.attr_float("epsilon", 1e-6f);
  const double norm = node.attr_float("norm_coefficient", 0.0f);
  return [=](KernelContext& context) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Step step, read_step(context, 3));
    const double rate = step.rate / (1.0 + static_cast<double>(step.count) * decay);
    // (X, G, H) -> (X', H')
    return update_groups<3>(context, step, [&](const std::array<double, 3>& in, std::array<double, 2>& out) {
      const double gr = norm * in[0] + in[1];
      out[1] = in[2] + gr * gr;
      out[0] = in[0] - rate * gr / (std::sqrt(out[1]) + epsilon);
    });
  };
}

KernelFunction bind_momentum(const Node& node, int64_t) {
  const double alpha = node.attr_float("alpha", 0.0f);
  const double beta = node.attr_float("beta", 0.0f);
  const double norm = node.attr_float("norm_coefficient", 0.0f);
  const std::string mode = node.attr_string("mode", "");
  return [=](KernelContext& context) -> Status {
    if (mode != "standard" && mode != "nesterov")
      return context.error("mode '" + mode + "' is neither 'standard' nor 'nesterov'");
    QFLOW_ASSIGN_OR_RETURN(const Step step, read_step(context, 3));
    // The first step (T = 0) takes the whole gradient.
    const double beta_adjusted = step.count > 0 ? beta : 1.0;
    const bool standard = mode == "standard";
    // (X, G, V) -> (X', V')
    return update_groups<3>(context, step, [&](const std::array<double, 3>& in, std::array<double, 2>& out) {
      const double gr = norm * in[0] + in[1];
      out[1] = alpha * in[2] + beta_adjusted * gr;
      out[0] = in[0] - step.rate * (standard ? out[1] : gr + alpha * out[1]);
    });
  };
}

KernelFunction bind_adam(const Node& node, int64_t) {
  const double alpha = node.attr_float("alpha", 0.9f);
  const double beta = node.attr_float("beta", 0.999f);
  const double epsilon = node.attr_float("epsilon", 1e-6f);
  const double norm = node.attr_float("norm_coefficient", 0.0f);
  const double norm_post = node.attr_float("norm_coefficient_post", 0.0f);
  return [=](KernelContext& context) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Step step, read_step(context, 4));
    const double t = static_cast<double>(step.count);
    // Bias correction of both moving averages, from the second step on.
    const double rate = step.count > 0 ? step.rate * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t))
                                       : step.rate;
    // (X, G, V, H) -> (X', V', H')
    return update_groups<4>(context, step, [&](const std::array<double, 4>& in, std::array<double, 3>& out) {
      const double gr = norm * in[0] + in[1];
      out[1] = alpha * in[2] + (1.0 - alpha) * gr;
      out[2] = beta * in[3] + (1.0 - beta) * gr * gr;
      out[0] = (1.0 - norm_post) * (in[0] - rate * (out[1] / (std::sqrt(out[2]) + epsilon)));
    });
  };
}

}  // namespace

void register_optimizer_kernels(KernelRegistry& registry) {
  registry.add(kTrainingDomain, "Adagrad", 1, kLatestOpset, bound_kernel(bind_adagrad));
  registry.add(kTrainingDomain, "Momentum", 1, kLatestOpset, bound_kernel(bind_momentum));
  registry.add(kTrainingDomain, "Adam", 1, kLatestOpset, bound_kernel(bind_adam));
}

}  // namespace qflow
