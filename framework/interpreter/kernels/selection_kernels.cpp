// Selection kernels: TopK, Unique, Compress, NonMaxSuppression, ReverseSequence and CumSum,
// the ops that pick, order or accumulate elements along one axis.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {
namespace {

using shape_detail::make_output;
using shape_detail::read_ints;

// A strict total order for sorting: NaN ranks above every number and equal to itself, as
// in numpy, so a comparator built on it stays valid on any input.
template <typename T>
bool less_total(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <typename T>
bool equal_total(T a, T b) {
  return !less_total(a, b) && !less_total(b, a);
}

// A scalar or one-element integer input such as k or axis.
Expected<int64_t> read_scalar_int(const KernelContext& ctx, const Tensor& t, const char* what) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> v, read_ints(ctx, t, what));
  if (v.size() != 1) return ctx.error(std::string(what) + " must hold one value, got " + shape_to_string(t.shape()));
  return v[0];
}

// ---- TopK -------------------------------------------------------------------------------

struct TopKAttrs {
  int64_t axis = -1;
  int64_t k = 0;  // opset 1 only; later opsets read input 1
  bool largest = true;
};

// Each line along the axis is ordered by value, ties by the lower index; "sorted = 0"
// leaves the order unspecified, so the sorted order serves it too.
template <typename T>
Status top_k_typed(KernelContext& ctx, const Tensor& x, int64_t axis, int64_t k, bool largest) {
  Shape out_shape = x.shape();
  out_shape[static_cast<std::size_t>(axis)] = k;
  QFLOW_ASSIGN_OR_RETURN(Tensor values, make_output(ctx, x.dtype(), out_shape));
  QFLOW_ASSIGN_OR_RETURN(Tensor indices, make_output(ctx, DType::Int64, out_shape));
  const int64_t n = x.dim(axis);
  const int64_t outer = dims_product(x.shape(), 0, static_cast<std::size_t>(axis));
  const int64_t inner = dims_product(x.shape(), static_cast<std::size_t>(axis) + 1, x.shape().size());
  const T* in = x.data<T>();
  T* pv = values.data<T>();
  int64_t* pi = indices.data<int64_t>();
  ctx.parallel_for(outer * inner, n * 8, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / inner, i = line % inner;
      const T* src = in + o * n * inner + i;
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const T va = src[a * inner], vb = src[b * inner];
        if (largest ? less_total(vb, va) : less_total(va, vb)) return true;
        return equal_total(va, vb) && a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + i;
        pv[at] = src[order[static_cast<std::size_t>(j)] * inner];
        pi[at] = order[static_cast<std::size_t>(j)];
      }
    }
  });
  ctx.outputs[0] = std::move(values);
  ctx.outputs[1] = std::move(indices);
  return Status::ok();
}

Status top_k(KernelContext& ctx, const TopKAttrs& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  auto axis = normalize_axis(attrs.axis, x->rank());
  if (!axis || x->rank() == 0) return ctx.error("axis " + std::to_string(attrs.axis) + " is out of range for rank " + std::to_string(x->rank()));
  int64_t k = attrs.k;
  if (ctx.opset >= 10) {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* k_input, ctx.required_input(1));
    QFLOW_ASSIGN_OR_RETURN(k, read_scalar_int(ctx, *k_input, "k"));
  }
  if (k < 0 || k > x->dim(*axis))
    return ctx.error("k = " + std::to_string(k) + " is outside [0, " + std::to_string(x->dim(*axis)) + "] for input " +
                     shape_to_string(x->shape()));
  return dispatch_numeric(x->dtype(), [&]<typename T>() { return top_k_typed<T>(ctx, *x, *axis, k, attrs.largest); });
}

KernelFactory top_k_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    TopKAttrs attrs;
    attrs.axis = node.attr_int("axis", -1);
    attrs.k = node.attr_int("k", 0);
    attrs.largest = node.attr_int("largest", 1) != 0;
    return [attrs](KernelContext& ctx) { return top_k(ctx, attrs); };
  });
}

// ---- Unique -----------------------------------------------------------------------------

// Viewing x as [outer, n, inner], the candidates are the n slices along the axis (with no
// axis, the n flattened elements). A stable sort groups equal slices with the earliest
// first, which gives every output at once.
template <typename T>
Status unique_typed(KernelContext& ctx, const Tensor& x, std::optional<int64_t> axis, bool sorted) {
  const std::size_t a = axis ? static_cast<std::size_t>(*axis) : 0;
  const int64_t n = axis ? x.dim(*axis) : x.numel();
  const int64_t outer = axis ? dims_product(x.shape(), 0, a) : 1;
  const int64_t inner = axis ? dims_product(x.shape(), a + 1, x.shape().size()) : 1;
  const T* in = x.data<T>();
  const auto element = [&](int64_t slice, int64_t e) { return in[((e / inner) * n + slice) * inner + e % inner]; };
  const int64_t slice_size = outer * inner;
  const auto slice_less = [&](int64_t s, int64_t t) {
    for (int64_t e = 0; e < slice_size; ++e) {
      const T u = element(s, e), v = element(t, e);
      if (less_total(u, v)) return true;
      if (less_total(v, u)) return false;
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), slice_less);
  // Groups in sorted order: their first occurrence and size.
  std::vector<int64_t> first, counts;
  std::vector<int64_t> group_of(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || slice_less(order[i - 1], order[i])) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    ++counts.back();
    group_of[static_cast<std::size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
  }
  // Output position of each group: sorted order, or order of first appearance.
  std::vector<int64_t> rank(first.size());
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!sorted) {
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(), [&](int64_t g, int64_t h) { return first[static_cast<std::size_t>(g)] < first[static_cast<std::size_t>(h)]; });
    for (std::size_t pos = 0; pos < by_first.size(); ++pos) rank[static_cast<std::size_t>(by_first[pos])] = static_cast<int64_t>(pos);
  }
  const int64_t unique_count = static_cast<int64_t>(first.size());
  Shape y_shape = axis ? x.shape() : Shape{unique_count};
  if (axis) y_shape[a] = unique_count;
  QFLOW_ASSIGN_OR_RETURN(Tensor y, make_output(ctx, x.dtype(), y_shape));
  Tensor indices(DType::Int64, {unique_count}), inverse(DType::Int64, {n}), count_out(DType::Int64, {unique_count});
  T* py = y.data<T>();
  for (std::size_t g = 0; g < first.size(); ++g) {
    const int64_t pos = rank[g];
    indices.data<int64_t>()[pos] = first[g];
    count_out.data<int64_t>()[pos] = counts[g];
    for (int64_t e = 0; e < slice_size; ++e) py[((e / inner) * unique_count + pos) * inner + e % inner] = element(first[g], e);
  }
  for (int64_t s = 0; s < n; ++s) inverse.data<int64_t>()[s] = rank[static_cast<std::size_t>(group_of[static_cast<std::size_t>(s)])];
  ctx.outputs[0] = std::move(y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(indices);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(inverse);
  if (ctx.outputs.size() > 3) ctx.outputs[3] = std::move(count_out);
  return Status::ok();
}

KernelFactory unique_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    std::optional<int64_t> axis;
    if (node.find_attribute("axis")) axis = node.attr_int("axis", 0);
    const bool sorted = node.attr_int("sorted", 1) != 0;
    return [axis, sorted](KernelContext& ctx) -> Status {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
      std::optional<int64_t> normalized;
      if (axis) {
        auto a = normalize_axis(*axis, x->rank());
        if (!a || x->rank() == 0) return ctx.error("axis " + std::to_string(*axis) + " is out of range for rank " + std::to_string(x->rank()));
        normalized = *a;
      }
      return dispatch_numeric(x->dtype(), [&]<typename T>() { return unique_typed<T>(ctx, *x, normalized, sorted); });
    };
  });
}

// ---- Compress ---------------------------------------------------------------------------

// Keeps the slices along the axis whose condition is true; a condition shorter than the
// axis drops the rest. Without an axis the input is flattened first.
Status compress(KernelContext& ctx, std::optional<int64_t> axis_attr) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* condition, ctx.required_input(1));
  if (condition->dtype() != DType::Bool || condition->rank() != 1)
    return ctx.error("condition must be a 1-D bool tensor, got " + std::string(dtype_name(condition->dtype())) + " " +
                     shape_to_string(condition->shape()));
  Shape shape = x->shape();
  std::size_t axis = 0;
  if (axis_attr) {
    auto a = normalize_axis(*axis_attr, x->rank());
    if (!a || x->rank() == 0) return ctx.error("axis " + std::to_string(*axis_attr) + " is out of range for rank " + std::to_string(x->rank()));
    axis = static_cast<std::size_t>(*a);
  } else {
    shape = {x->numel()};
  }
  const int64_t dim = shape[axis];
  if (condition->numel() > dim)
    return ctx.error("condition has " + std::to_string(condition->numel()) + " entries for an axis of size " + std::to_string(dim));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition->numel(); ++i)
    if (condition->data<bool>()[i]) kept.push_back(i);
  Shape out_shape = shape;
  out_shape[axis] = static_cast<int64_t>(kept.size());
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(ctx, x->dtype(), out_shape));
  const int64_t outer = dims_product(shape, 0, axis);
  const std::size_t chunk = static_cast<std::size_t>(dims_product(shape, axis + 1, shape.size())) * dtype_size(x->dtype());
  std::byte* dst = out.raw_data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : kept) {
      if (chunk > 0) std::memcpy(dst, x->raw_data() + static_cast<std::size_t>(o * dim + i) * chunk, chunk);
      dst += chunk;
    }
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

KernelFactory compress_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    std::optional<int64_t> axis;
    if (node.find_attribute("axis")) axis = node.attr_int("axis", 0);
    return [axis](KernelContext& ctx) { return compress(ctx, axis); };
  });
}

// ---- ReverseSequence --------------------------------------------------------------------

// Reverses the first sequence_lens[b] steps along the time axis of each batch entry and
// copies the rest; batch and time are axes 0 and 1 in either order.
Status reverse_sequence(KernelContext& ctx, int64_t batch_axis, int64_t time_axis) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* lens_input, ctx.required_input(1));
  if (x->rank() < 2) return ctx.error("the input must have rank 2 or more, got " + shape_to_string(x->shape()));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order, got " + std::to_string(batch_axis) + " and " +
                     std::to_string(time_axis));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> lens, read_ints(ctx, *lens_input, "sequence_lens"));
  const int64_t batch = x->dim(batch_axis), steps = x->dim(time_axis);
  if (static_cast<int64_t>(lens.size()) != batch)
    return ctx.error("sequence_lens has " + std::to_string(lens.size()) + " entries for a batch of " + std::to_string(batch));
  for (int64_t len : lens)
    if (len < 0 || len > steps)
      return ctx.error("sequence length " + std::to_string(len) + " is outside [0, " + std::to_string(steps) + "]");
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(ctx, x->dtype(), x->shape()));
  const std::size_t chunk = static_cast<std::size_t>(dims_product(x->shape(), 2, x->shape().size())) * dtype_size(x->dtype());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < lens[static_cast<std::size_t>(b)] ? lens[static_cast<std::size_t>(b)] - 1 - t : t;
      const auto offset = [&](int64_t step) {
        return static_cast<std::size_t>(batch_axis == 0 ? b * steps + step : step * batch + b) * chunk;
      };
      if (chunk > 0) std::memcpy(out.raw_data() + offset(t), x->raw_data() + offset(from), chunk);
    }
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

KernelFactory reverse_sequence_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    const int64_t batch_axis = node.attr_int("batch_axis", 1), time_axis = node.attr_int("time_axis", 0);
    return [batch_axis, time_axis](KernelContext& ctx) { return reverse_sequence(ctx, batch_axis, time_axis); };
  });
}

// ---- CumSum -----------------------------------------------------------------------------

// Running sums along the axis in the element type, one line at a time in a fixed order.
template <typename T>
Status cum_sum_typed(KernelContext& ctx, const Tensor& x, int64_t axis, bool exclusive, bool reverse) {
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(ctx, x.dtype(), x.shape()));
  const int64_t n = x.dim(axis);
  const int64_t outer = dims_product(x.shape(), 0, static_cast<std::size_t>(axis));
  const int64_t inner = dims_product(x.shape(), static_cast<std::size_t>(axis) + 1, x.shape().size());
  const T* in = x.data<T>();
  T* po = out.data<T>();
  ctx.parallel_for(outer * inner, n, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      T sum = T(0);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = base + (reverse ? n - 1 - j : j) * inner;
        if (exclusive) {
          po[at] = sum;
          sum = static_cast<T>(sum + in[at]);
        } else {
          sum = static_cast<T>(sum + in[at]);
          po[at] = sum;
        }
      }
    }
  });
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

KernelFactory cum_sum_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    const bool exclusive = node.attr_int("exclusive", 0) != 0, reverse = node.attr_int("reverse", 0) != 0;
    return [exclusive, reverse](KernelContext& ctx) -> Status {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
      QFLOW_ASSIGN_OR_RETURN(const Tensor* axis_input, ctx.required_input(1));
      QFLOW_ASSIGN_OR_RETURN(int64_t axis_value, read_scalar_int(ctx, *axis_input, "axis"));
      auto axis = normalize_axis(axis_value, x->rank());
      if (!axis || x->rank() == 0) return ctx.error("axis " + std::to_string(axis_value) + " is out of range for rank " + std::to_string(x->rank()));
      return dispatch_numeric(x->dtype(), [&]<typename T>() { return cum_sum_typed<T>(ctx, *x, *axis, exclusive, reverse); });
    };
  });
}

// ---- NonMaxSuppression ------------------------------------------------------------------

struct Box {
  float y1, x1, y2, x2;
  float area() const { return (y2 - y1) * (x2 - x1); }
};

// Corners in either diagonal order, or centre and size (center_point_box = 1).
Box read_box(const float* b, bool center_point) {
  if (center_point) {
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

bool overlaps_more_than(const Box& a, const Box& b, float threshold) {
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0 || a.area() <= 0 || b.area() <= 0) return false;
  const float intersection = ih * iw;
  return intersection / (a.area() + b.area() - intersection) > threshold;
}

// Greedy per batch and class: candidates above the score threshold in decreasing score
// (ties by lower box index), each kept unless it overlaps a kept box by more than the IoU
// threshold, until max_output_boxes_per_class are kept.
Status non_max_suppression(KernelContext& ctx, bool center_point) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* boxes, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scores, ctx.required_input(1));
  if (boxes->dtype() != DType::Float32 || scores->dtype() != DType::Float32)
    return ctx.error("boxes and scores must be float, got " + std::string(dtype_name(boxes->dtype())) + " and " +
                     std::string(dtype_name(scores->dtype())));
  if (boxes->rank() != 3 || boxes->dim(2) != 4 || scores->rank() != 3 || scores->dim(0) != boxes->dim(0) ||
      scores->dim(2) != boxes->dim(1))
    return ctx.error("boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], got " +
                     shape_to_string(boxes->shape()) + " and " + shape_to_string(scores->shape()));
  int64_t max_per_class = 0;
  float iou_threshold = 0;
  std::optional<float> score_threshold;
  if (const Tensor* t = ctx.input(2)) {
    QFLOW_ASSIGN_OR_RETURN(max_per_class, read_scalar_int(ctx, *t, "max_output_boxes_per_class"));
  }
  if (const Tensor* t = ctx.input(3)) {
    if (t->dtype() != DType::Float32 || t->numel() != 1) return ctx.error("iou_threshold must be one float");
    iou_threshold = t->data<float>()[0];
    if (!(iou_threshold >= 0 && iou_threshold <= 1))
      return ctx.error("iou_threshold must lie in [0, 1], got " + std::to_string(iou_threshold));
  }
  if (const Tensor* t = ctx.input(4)) {
    if (t->dtype() != DType::Float32 || t->numel() != 1) return ctx.error("score_threshold must be one float");
    score_threshold = t->data<float>()[0];
  }
  const int64_t batches = boxes->dim(0), count = boxes->dim(1), classes = scores->dim(1);
  std::vector<int64_t> selected;  // triples (batch, class, box)
  std::vector<int64_t> candidates;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches; ++b) {
    const float* box_data = boxes->data<float>() + b * count * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores->data<float>() + (b * classes + c) * count;
      candidates.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!score_threshold || s[i] > *score_threshold) candidates.push_back(i);
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const Box box = read_box(box_data + i * 4, center_point);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box& k) { return overlaps_more_than(k, box, iou_threshold); })) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  ctx.outputs[0] = Tensor::from_vector<int64_t>({static_cast<int64_t>(selected.size() / 3), 3}, selected);
  return Status::ok();
}

KernelFactory non_max_suppression_kernel() {
  return bound_kernel([](const Node& node, int64_t) -> KernelFunction {
    const bool center_point = node.attr_int("center_point_box", 0) != 0;
    return [center_point](KernelContext& ctx) { return non_max_suppression(ctx, center_point); };
  });
}

}  // namespace

void register_selection_kernels(KernelRegistry& registry) {
  registry.add("", "TopK", 1, kLatestOpset, top_k_kernel());
  registry.add("", "Unique", 11, kLatestOpset, unique_kernel());
  registry.add("", "Compress", 9, kLatestOpset, compress_kernel());
  registry.add("", "ReverseSequence", 10, kLatestOpset, reverse_sequence_kernel());
  registry.add("", "CumSum", 11, kLatestOpset, cum_sum_kernel());
  registry.add("", "NonMaxSuppression", 10, kLatestOpset, non_max_suppression_kernel());
}

}  // namespace qflow
