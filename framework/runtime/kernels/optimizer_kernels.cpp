// The training optimizers of ai.onnx.preview.training (Adagrad, Momentum, Adam): one update
// step of every tensor group they are given, as the operators define it. Inputs are R (the
// learning rate) and T (the update count), then the groups' tensors, one list per role.
#include <cmath>
#include <string>
#include <vector>

#include "framework/runtime/kernel_registry.h"
#include "framework/runtime/kernels/bound_kernel.h"

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

KernelFunction bind_adagrad(const Node& node, int64_t) {
  const double decay = node.attr_float("decay_factor", 0.0f);
  const double epsilon = node.attr_float("epsilon", 1e-6f);
  const double norm = node.attr_float("norm_coefficient", 0.0f);
  return [=](KernelContext& context) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Step step, read_step(context, 3));
    const double rate = step.rate / (1.0 + static_cast<double>(step.count) * decay);
    for (std::size_t g = 0; g < step.groups; ++g) {
      QFLOW_ASSIGN_OR_RETURN(const auto in, group_inputs(context, step, 3, g));
      const Tensor *x = in[0], *grad = in[1], *h = in[2];
      Tensor x_new(x->dtype(), x->shape()), h_new(x->dtype(), x->shape());
      for (int64_t i = 0; i < x->numel(); ++i) {
        const double gr = norm * at(*x, i) + at(*grad, i);
        const double hn = at(*h, i) + gr * gr;
        set(h_new, i, hn);
        set(x_new, i, at(*x, i) - rate * gr / (std::sqrt(hn) + epsilon));
      }
      context.outputs[g] = std::move(x_new);
      context.outputs[step.groups + g] = std::move(h_new);
    }
    return Status::ok();
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
    for (std::size_t g = 0; g < step.groups; ++g) {
      QFLOW_ASSIGN_OR_RETURN(const auto in, group_inputs(context, step, 3, g));
      const Tensor *x = in[0], *grad = in[1], *v = in[2];
      Tensor x_new(x->dtype(), x->shape()), v_new(x->dtype(), x->shape());
      for (int64_t i = 0; i < x->numel(); ++i) {
        const double gr = norm * at(*x, i) + at(*grad, i);
        const double vn = alpha * at(*v, i) + beta_adjusted * gr;
        set(v_new, i, vn);
        set(x_new, i, at(*x, i) - step.rate * (mode == "standard" ? vn : gr + alpha * vn));
      }
      context.outputs[g] = std::move(x_new);
      context.outputs[step.groups + g] = std::move(v_new);
    }
    return Status::ok();
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
    for (std::size_t g = 0; g < step.groups; ++g) {
      QFLOW_ASSIGN_OR_RETURN(const auto in, group_inputs(context, step, 4, g));
      const Tensor *x = in[0], *grad = in[1], *v = in[2], *h = in[3];
      Tensor x_new(x->dtype(), x->shape()), v_new(x->dtype(), x->shape()), h_new(x->dtype(), x->shape());
      for (int64_t i = 0; i < x->numel(); ++i) {
        const double gr = norm * at(*x, i) + at(*grad, i);
        const double vn = alpha * at(*v, i) + (1.0 - alpha) * gr;
        const double hn = beta * at(*h, i) + (1.0 - beta) * gr * gr;
        set(v_new, i, vn);
        set(h_new, i, hn);
        set(x_new, i, (1.0 - norm_post) * (at(*x, i) - rate * (vn / (std::sqrt(hn) + epsilon))));
      }
      context.outputs[g] = std::move(x_new);
      context.outputs[step.groups + g] = std::move(v_new);
      context.outputs[2 * step.groups + g] = std::move(h_new);
    }
    return Status::ok();
  };
}

}  // namespace

void register_optimizer_kernels(KernelRegistry& registry) {
  registry.add(kTrainingDomain, "Adagrad", 1, kLatestOpset, bound_kernel(bind_adagrad));
  registry.add(kTrainingDomain, "Momentum", 1, kLatestOpset, bound_kernel(bind_momentum));
  registry.add(kTrainingDomain, "Adam", 1, kLatestOpset, bound_kernel(bind_adam));
}

}  // namespace qflow
