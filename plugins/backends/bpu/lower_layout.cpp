// Lowering of the data-movement ops: Reshape / Flatten / Squeeze / Unsqueeze -> reshape,
// Transpose -> transpose, Slice with constant parameters -> slice. They keep the input's
// quantization; a different output quantization adds a requantize.
#include <algorithm>

#include "lowering_context.h"

namespace qflow::lowering {

namespace {

struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;
};

bool constant_ints(const Lowerer& l, const Value* v, std::vector<int64_t>& out) {
  if (!v) return false;
  const Tensor* t = l.constant(v);
  if (!t || !is_integer(t->dtype())) return false;
  out = t->to_int64s();
  return true;
}

// Normalized Slice parameters (non-negative axes, starts / ends clamped, positive steps).
std::string slice_spec(const Lowerer& l, const Node& node, SliceSpec& spec) {
  const Shape x = l.shape(node.input(0));
  const auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (l.opset() < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    axes = node.attr_ints("axes");
  } else {
    if (!constant_ints(l, node.input(1), starts) || !constant_ints(l, node.input(2), ends))
      return no_lowering(node, "with starts or ends that are not constant");
    if (node.input(3) && !constant_ints(l, node.input(3), axes)) return no_lowering(node, "with axes that are not constant");
    if (node.input(4) && !constant_ints(l, node.input(4), steps)) return no_lowering(node, "with steps that are not constant");
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return no_lowering(node, "with parameter lists of different lengths");
  for (std::size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank) return no_lowering(node, "with axis " + std::to_string(axes[i]) + " out of range");
    if (steps[i] <= 0) return no_lowering(node, "with step " + std::to_string(steps[i]) + " (positive steps only)");
    const int64_t dim = x[static_cast<std::size_t>(axis)];
    auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
    spec.axes.push_back(axis);
    spec.starts.push_back(clamp(starts[i]));
    spec.ends.push_back(clamp(ends[i]));
    spec.steps.push_back(steps[i]);
  }
  return {};
}

}  // namespace

std::string gap_layout(const Lowerer& l, const Node& node) {
  if (!l.quant(node.input(0)) || l.constant(node.input(0))) return no_lowering(node, "with an input that is not a quantized activation");
  if (node.op_type() == "Slice") {
    SliceSpec spec;
    return slice_spec(l, node, spec);
  }
  if (node.op_type() == "Transpose") {
    const auto rank = static_cast<int64_t>(l.shape(node.input(0)).size());
    std::vector<int64_t> perm = node.attr_ints("perm");
    if (!perm.empty() && static_cast<int64_t>(perm.size()) != rank) return no_lowering(node, "with a perm of the wrong length");
  }
  return {};
}

Status lower_layout(Lowerer& l, const Node& node) {
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  const std::string& op = node.op_type();
  if (op == "Transpose") {
    lowered::Op lop = make_op("transpose", node, {}, {});
    std::vector<int64_t> perm = node.attr_ints("perm");
    if (perm.empty()) {
      const auto rank = static_cast<int64_t>(l.shape(node.input(0)).size());
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    set_ints(lop, "perm", perm);
    return emit_at_input_quant(l, node, std::move(lop), x);
  }
  if (op == "Slice") {
    SliceSpec spec;
    slice_spec(l, node, spec);
    lowered::Op lop = make_op("slice", node, {}, {});
    set_ints(lop, "starts", spec.starts);
    set_ints(lop, "ends", spec.ends);
    set_ints(lop, "axes", spec.axes);
    set_ints(lop, "steps", spec.steps);
    return emit_at_input_quant(l, node, std::move(lop), x);
  }
  return emit_at_input_quant(l, node, make_op("reshape", node, {}, {}), x);
}

}  // namespace qflow::lowering
