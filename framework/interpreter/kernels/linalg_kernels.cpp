// Linear algebra kernels: Einsum by direct summation over the index space, and Det by LU
// decomposition with partial pivoting.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {
namespace {

using shape_detail::make_output;

// ---- Einsum -----------------------------------------------------------------------------

// A term's subscripts: letters as their character code, '...' as kEllipsis.
constexpr int kEllipsis = -1;
// Labels of the broadcast dimensions an ellipsis stands for: kBroadcastLabel + position,
// counted from the left of the widest ellipsis.
constexpr int kBroadcastLabel = 128;
constexpr int kLabelCount = 256;

struct Equation {
  std::vector<std::vector<int>> inputs;
  bool explicit_output = false;
  std::vector<int> output;
};

Expected<std::vector<int>> parse_term(const std::string& term, const std::string& equation) {
  std::vector<int> labels;
  for (std::size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      for (int l : labels)
        if (l == kEllipsis) return invalid_input("equation '" + equation + "' has two ellipses in one term");
      labels.push_back(kEllipsis);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      labels.push_back(term[i]);
    } else {
      return invalid_input("equation '" + equation + "' has an unexpected character '" + term.substr(i, 1) + "'");
    }
  }
  return labels;
}

Expected<Equation> parse_equation(const std::string& text) {
  std::string compact;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  Equation eq;
  const std::size_t arrow = compact.find("->");
  const std::string lhs = compact.substr(0, arrow);
  if (arrow != std::string::npos) {
    eq.explicit_output = true;
    QFLOW_ASSIGN_OR_RETURN(eq.output, parse_term(compact.substr(arrow + 2), text));
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = lhs.find(',', start);
    QFLOW_ASSIGN_OR_RETURN(std::vector<int> term, parse_term(lhs.substr(start, comma - start), text));
    eq.inputs.push_back(std::move(term));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return eq;
}

// Every label of the resolved equation with its size, the output labels first; each
// input's element stride per label (repeated labels add up: a diagonal; broadcast
// dimensions of size 1 get stride 0).
struct EinsumPlan {
  std::vector<int64_t> sizes;                 // per label, output labels first
  std::size_t output_labels = 0;
  std::vector<std::vector<int64_t>> strides;  // [input][label]
};

Expected<EinsumPlan> plan_einsum(const KernelContext& ctx, const Equation& eq, const std::vector<const Tensor*>& inputs) {
  if (eq.inputs.size() != inputs.size())
    return ctx.error("the equation has " + std::to_string(eq.inputs.size()) + " input terms for " +
                     std::to_string(inputs.size()) + " inputs");
  // Expand each ellipsis into broadcast labels, aligned on the right as numpy broadcasts.
  int64_t widest = 0;
  std::vector<int64_t> ellipsis_rank(inputs.size(), 0);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& term = eq.inputs[i];
    const bool has_ellipsis = std::find(term.begin(), term.end(), kEllipsis) != term.end();
    const int64_t letters = static_cast<int64_t>(term.size()) - (has_ellipsis ? 1 : 0);
    ellipsis_rank[i] = inputs[i]->rank() - letters;
    if (ellipsis_rank[i] < 0 || (!has_ellipsis && ellipsis_rank[i] != 0))
      return ctx.error("input " + std::to_string(i) + " of shape " + shape_to_string(inputs[i]->shape()) +
                       " does not fit its term of " + std::to_string(letters) + " subscripts");
    widest = std::max(widest, ellipsis_rank[i]);
  }
  if (widest > kLabelCount - kBroadcastLabel)
    return ctx.error("an ellipsis stands for " + std::to_string(widest) + " dimensions, more than " +
                     std::to_string(kLabelCount - kBroadcastLabel));
  std::vector<std::vector<int>> labels(inputs.size());
  std::vector<int64_t> size(kLabelCount, -1);
  std::vector<int> occurrences(kLabelCount, 0);
  std::vector<int> first_seen;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (int l : eq.inputs[i]) {
      if (l != kEllipsis) {
        labels[i].push_back(l);
        continue;
      }
      for (int64_t k = 0; k < ellipsis_rank[i]; ++k) labels[i].push_back(kBroadcastLabel + static_cast<int>(widest - ellipsis_rank[i] + k));
    }
    for (std::size_t d = 0; d < labels[i].size(); ++d) {
      const int l = labels[i][d];
      const int64_t s = inputs[i]->dim(static_cast<int64_t>(d));
      if (occurrences[static_cast<std::size_t>(l)]++ == 0) first_seen.push_back(l);
      int64_t& known = size[static_cast<std::size_t>(l)];
      if (known == -1 || (l >= kBroadcastLabel && known == 1)) {
        known = s;
      } else if (s != known && !(l >= kBroadcastLabel && s == 1)) {
        return ctx.error("subscript sizes disagree: " + std::to_string(known) + " and " + std::to_string(s) + " in input " +
                         std::to_string(i) + " of shape " + shape_to_string(inputs[i]->shape()));
      }
    }
  }
  std::vector<int> out;
  if (eq.explicit_output) {
    for (int l : eq.output) {
      if (l == kEllipsis) {
        for (int64_t k = 0; k < widest; ++k) out.push_back(kBroadcastLabel + static_cast<int>(k));
        continue;
      }
      if (occurrences[static_cast<std::size_t>(l)] == 0)
        return ctx.error(std::string("output subscript '") + static_cast<char>(l) + "' appears in no input");
      if (std::find(out.begin(), out.end(), l) != out.end())
        return ctx.error(std::string("output subscript '") + static_cast<char>(l) + "' appears twice");
      out.push_back(l);
    }
  } else {
    // Implicit mode: the broadcast dimensions, then the letters used once, alphabetically.
    for (int64_t k = 0; k < widest; ++k) out.push_back(kBroadcastLabel + static_cast<int>(k));
    for (int l = 0; l < kBroadcastLabel; ++l)
      if (occurrences[static_cast<std::size_t>(l)] == 1) out.push_back(l);
  }
  std::vector<int> order = out;
  for (int l : first_seen)
    if (std::find(out.begin(), out.end(), l) == out.end()) order.push_back(l);
  EinsumPlan plan;
  plan.output_labels = out.size();
  for (int l : order) plan.sizes.push_back(size[static_cast<std::size_t>(l)]);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int64_t> strides = contiguous_strides(inputs[i]->shape());
    std::vector<int64_t> per_label(order.size(), 0);
    for (std::size_t d = 0; d < labels[i].size(); ++d) {
      if (inputs[i]->dim(static_cast<int64_t>(d)) == 1) continue;  // broadcast or a single position
      const auto at = static_cast<std::size_t>(std::find(order.begin(), order.end(), labels[i][d]) - order.begin());
      per_label[at] += strides[d];
    }
    plan.strides.push_back(std::move(per_label));
  }
  return plan;
}

// Each output element sums the product of the inputs over the summed labels in row-major
// order, accumulating in double (int64 for integers), independent of the thread split.
template <typename T>
Status einsum_typed(KernelContext& ctx, const EinsumPlan& plan, const std::vector<const Tensor*>& inputs, DType dtype) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  const Shape out_shape(plan.sizes.begin(), plan.sizes.begin() + static_cast<std::ptrdiff_t>(plan.output_labels));
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(ctx, dtype, out_shape));
  const std::size_t labels = plan.sizes.size(), n_in = inputs.size();
  int64_t sum_count = 1;
  for (std::size_t l = plan.output_labels; l < labels; ++l) sum_count *= plan.sizes[l];
  T* po = out.data<T>();
  ctx.parallel_for(out.numel(), sum_count * static_cast<int64_t>(n_in + 1), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> base(n_in), offset(n_in), index(labels);
    for (int64_t o = begin; o < end; ++o) {
      std::fill(base.begin(), base.end(), 0);
      int64_t rest = o;
      for (std::size_t l = plan.output_labels; l-- > 0;) {
        const int64_t coord = rest % plan.sizes[l];
        rest /= plan.sizes[l];
        for (std::size_t i = 0; i < n_in; ++i) base[i] += coord * plan.strides[i][l];
      }
      std::fill(index.begin(), index.end(), 0);
      offset = base;
      Acc sum = 0;
      for (int64_t s = 0; s < sum_count; ++s) {
        Acc product = 1;
        for (std::size_t i = 0; i < n_in; ++i) product *= static_cast<Acc>(inputs[i]->data<T>()[offset[i]]);
        sum += product;
        for (std::size_t l = labels; l-- > plan.output_labels;) {
          for (std::size_t i = 0; i < n_in; ++i) offset[i] += plan.strides[i][l];
          if (++index[l] < plan.sizes[l]) break;
          for (std::size_t i = 0; i < n_in; ++i) offset[i] -= plan.strides[i][l] * plan.sizes[l];
          index[l] = 0;
        }
      }
      po[o] = static_cast<T>(sum);
    }
  });
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

KernelFactory einsum_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    const std::string equation = node.attr_string("equation", "");
    return [equation](KernelContext& ctx) -> Status {
      auto eq = parse_equation(equation);
      if (!eq) return ctx.error(eq.status().message());
      std::vector<const Tensor*> inputs;
      for (std::size_t i = 0; i < ctx.input_count(); ++i) {
        QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(i));
        if (x->dtype() != ctx.inputs[0]->dtype())
          return ctx.error("inputs must share one element type, got " + std::string(dtype_name(ctx.inputs[0]->dtype())) +
                           " and " + std::string(dtype_name(x->dtype())));
        inputs.push_back(x);
      }
      if (inputs.empty()) return ctx.error("needs at least one input");
      QFLOW_ASSIGN_OR_RETURN(EinsumPlan plan, plan_einsum(ctx, *eq, inputs));
      return dispatch_numeric(inputs[0]->dtype(),
                              [&]<typename T>() { return einsum_typed<T>(ctx, plan, inputs, inputs[0]->dtype()); });
    };
  });
}

// ---- Det --------------------------------------------------------------------------------

template <typename T>
Status det_typed(KernelContext& ctx, const Tensor& x) {
  const int64_t m = x.dim(x.rank() - 1);
  const Shape out_shape(x.shape().begin(), x.shape().end() - 2);
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(ctx, x.dtype(), out_shape));
  const T* in = x.data<T>();
  T* po = out.data<T>();
  ctx.parallel_for(out.numel(), m * m * m, [&](int64_t begin, int64_t end) {
    std::vector<double> a(static_cast<std::size_t>(m * m));
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t i = 0; i < m * m; ++i) a[static_cast<std::size_t>(i)] = static_cast<double>(in[b * m * m + i]);
      const auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<std::size_t>(r * m + c)]; };
      double det = 1;
      for (int64_t col = 0; col < m && det != 0; ++col) {
        int64_t pivot = col;
        for (int64_t r = col + 1; r < m; ++r)
          if (std::abs(at(r, col)) > std::abs(at(pivot, col))) pivot = r;
        if (at(pivot, col) == 0) {
          det = 0;
          break;
        }
        if (pivot != col) {
          for (int64_t c = 0; c < m; ++c) std::swap(at(pivot, c), at(col, c));
          det = -det;
        }
        det *= at(col, col);
        for (int64_t r = col + 1; r < m; ++r) {
          const double factor = at(r, col) / at(col, col);
          for (int64_t c = col; c < m; ++c) at(r, c) -= factor * at(col, c);
        }
      }
      po[b] = static_cast<T>(det);
    }
  });
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

Status det(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(ctx, *x));
  if (x->rank() < 2 || x->dim(x->rank() - 1) != x->dim(x->rank() - 2))
    return ctx.error("the input must end in a square matrix, got " + shape_to_string(x->shape()));
  return dispatch_float(x->dtype(), [&]<typename T>() { return det_typed<T>(ctx, *x); });
}

}  // namespace

void register_linalg_kernels(KernelRegistry& registry) {
  registry.add("", "Einsum", 12, kLatestOpset, einsum_kernel());
  registry.add_function("", "Det", 11, kLatestOpset, det);
}

}  // namespace qflow
