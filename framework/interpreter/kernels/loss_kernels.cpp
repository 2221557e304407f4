// Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the latter is the
// former applied to a log-softmax over the class axis).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"

namespace qflow {
namespace {

enum class Reduction { None, Sum, Mean };

struct LossAttrs {
  std::optional<Reduction> reduction;  // nullopt: an unknown spelling, refused at run time
  std::string reduction_name;
  std::optional<int64_t> ignore_index;
};

LossAttrs read_loss_attrs(const Node& node) {
  LossAttrs attrs;
  attrs.reduction_name = node.attr_string("reduction", "mean");
  if (attrs.reduction_name == "none") attrs.reduction = Reduction::None;
  if (attrs.reduction_name == "sum") attrs.reduction = Reduction::Sum;
  if (attrs.reduction_name == "mean") attrs.reduction = Reduction::Mean;
  if (node.find_attribute("ignore_index")) attrs.ignore_index = node.attr_int("ignore_index", 0);
  return attrs;
}

// Scores [N, C, d1, ...], targets [N, d1, ...] and optional weights [C], checked together.
Status check_loss_inputs(const KernelContext& ctx, const LossAttrs& attrs, const Tensor& scores, const Tensor& target,
                         const Tensor* weight) {
  if (!attrs.reduction) return ctx.error("reduction must be none, sum or mean, got '" + attrs.reduction_name + "'");
  QFLOW_RETURN_IF_ERROR(check_float_input(ctx, scores));
  if (scores.rank() < 2) return ctx.error("the input must have rank 2 or more, got " + shape_to_string(scores.shape()));
  if (target.dtype() != DType::Int32 && target.dtype() != DType::Int64)
    return ctx.error("the target must be int32 or int64, got " + std::string(dtype_name(target.dtype())));
  Shape expected = scores.shape();
  expected.erase(expected.begin() + 1);
  if (target.shape() != expected)
    return ctx.error("the target shape " + shape_to_string(target.shape()) + " does not match the input shape " +
                     shape_to_string(scores.shape()) + " (expected " + shape_to_string(expected) + ")");
  if (weight && (weight->dtype() != scores.dtype() || weight->shape() != Shape{scores.dim(1)}))
    return ctx.error("the weight must be " + std::string(dtype_name(scores.dtype())) + " [" + std::to_string(scores.dim(1)) +
                     "], got " + std::string(dtype_name(weight->dtype())) + " " + shape_to_string(weight->shape()));
  return Status::ok();
}

// -log_prob[n, target, d] * weight[target], reduced. Targets equal to ignore_index weigh 0
// (they may lie outside [0, C)); the mean divides by the total weight, as the ONNX reference
// does. Sums run in double in index order, so the result is independent of threading.
template <typename T>
Status nll_typed(KernelContext& ctx, const LossAttrs& attrs, const Tensor& log_prob, const Tensor& target,
                 const Tensor* weight) {
  const int64_t n = log_prob.dim(0), classes = log_prob.dim(1);
  const int64_t inner = dims_product(log_prob.shape(), 2, log_prob.shape().size());
  const std::vector<int64_t> labels = target.to_int64s();
  const T* in = log_prob.data<T>();
  const T* w = weight ? weight->data<T>() : nullptr;
  std::vector<double> losses(labels.size());
  double loss_sum = 0, weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t d = 0; d < inner; ++d) {
      const std::size_t at = static_cast<std::size_t>(b * inner + d);
      const int64_t label = labels[at];
      if (attrs.ignore_index && label == *attrs.ignore_index) continue;
      if (label < 0 || label >= classes)
        return ctx.error("target " + std::to_string(label) + " at flat index " + std::to_string(at) +
                         " is outside [0, " + std::to_string(classes) + ")");
      const double factor = w ? static_cast<double>(w[label]) : 1.0;
      losses[at] = -static_cast<double>(in[(b * classes + label) * inner + d]) * factor;
      loss_sum += losses[at];
      weight_sum += factor;
    }
  }
  if (*attrs.reduction == Reduction::None) {
    Tensor out(log_prob.dtype(), target.shape());
    T* po = out.data<T>();
    for (std::size_t i = 0; i < losses.size(); ++i) po[i] = static_cast<T>(losses[i]);
    ctx.outputs[0] = std::move(out);
  } else {
    const double value = *attrs.reduction == Reduction::Sum ? loss_sum : loss_sum / weight_sum;
    ctx.outputs[0] = Tensor::scalar<T>(static_cast<T>(value));
  }
  return Status::ok();
}

Status nll(KernelContext& ctx, const LossAttrs& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* input, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* target, ctx.required_input(1));
  const Tensor* weight = ctx.input(2);
  QFLOW_RETURN_IF_ERROR(check_loss_inputs(ctx, attrs, *input, *target, weight));
  return dispatch_float(input->dtype(), [&]<typename T>() { return nll_typed<T>(ctx, attrs, *input, *target, weight); });
}

// log_softmax over axis 1, shifted by the maximum so exp cannot overflow.
template <typename T>
Tensor log_softmax_classes(const Tensor& scores) {
  const int64_t n = scores.dim(0), classes = scores.dim(1);
  const int64_t inner = dims_product(scores.shape(), 2, scores.shape().size());
  Tensor out(scores.dtype(), scores.shape());
  const T* in = scores.data<T>();
  T* po = out.data<T>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t d = 0; d < inner; ++d) {
      const T* x = in + b * classes * inner + d;
      double peak = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) peak = std::max(peak, static_cast<double>(x[c * inner]));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(x[c * inner]) - peak);
      const double log_sum = std::log(sum);
      T* y = po + b * classes * inner + d;
      for (int64_t c = 0; c < classes; ++c) y[c * inner] = static_cast<T>(static_cast<double>(x[c * inner]) - peak - log_sum);
    }
  }
  return out;
}

Status softmax_cross_entropy(KernelContext& ctx, const LossAttrs& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scores, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* labels, ctx.required_input(1));
  const Tensor* weight = ctx.input(2);
  QFLOW_RETURN_IF_ERROR(check_loss_inputs(ctx, attrs, *scores, *labels, weight));
  return dispatch_float(scores->dtype(), [&]<typename T>() -> Status {
    Tensor log_prob = log_softmax_classes<T>(*scores);
    QFLOW_RETURN_IF_ERROR(nll_typed<T>(ctx, attrs, log_prob, *labels, weight));
    if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(log_prob);
    return Status::ok();
  });
}

template <Status (*Loss)(KernelContext&, const LossAttrs&)>
KernelFactory loss_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    return [attrs = read_loss_attrs(node)](KernelContext& ctx) { return Loss(ctx, attrs); };
  });
}

}  // namespace

void register_loss_kernels(KernelRegistry& registry) {
  registry.add("", "NegativeLogLikelihoodLoss", 12, kLatestOpset, loss_kernel<nll>());
  registry.add("", "SoftmaxCrossEntropyLoss", 12, kLatestOpset, loss_kernel<softmax_cross_entropy>());
}

}  // namespace qflow
