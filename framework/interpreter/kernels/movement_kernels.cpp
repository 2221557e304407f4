// Data-movement kernels: Concat, Split, Slice, Transpose, Pad, Expand, Tile, Trilu, DepthToSpace, SpaceToDepth.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {

namespace {

using shape_detail::make_output;
using shape_detail::normalize_axes;
using shape_detail::read_ints;
using shape_detail::remap_axes;

Status concat(KernelContext& context) {
  std::vector<const Tensor*> inputs;
  for (const Tensor* t : context.inputs)
    if (t) inputs.push_back(t);
  if (inputs.empty()) return context.error("no inputs");
  const Tensor& first = *inputs[0];
  const int64_t rank = first.rank();
  if (rank == 0) return context.error("inputs must have rank 1 or more");
  if (context.opset >= 4 && !context.node.find_attribute("axis")) return context.error("attribute 'axis' is missing");
  auto axis_or = normalize_axis(context.node.attr_int("axis", 1), rank);
  if (!axis_or) return context.error(axis_or.status().message());
  const std::size_t axis = static_cast<std::size_t>(*axis_or);
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (const Tensor* t : inputs) {
    bool same = t->dtype() == first.dtype() && t->rank() == rank;
    for (std::size_t d = 0; same && d < out_shape.size(); ++d)
      if (d != axis && t->shape()[d] != first.shape()[d]) same = false;
    if (!same)
      return context.error("input " + std::string(dtype_name(t->dtype())) + " " + shape_to_string(t->shape()) +
                           " does not match " + std::string(dtype_name(first.dtype())) + " " +
                           shape_to_string(first.shape()) + " outside axis " + std::to_string(axis));
    out_shape[axis] += t->shape()[axis];
  }
  // Every element is copied in: a dead buffer of the run will do (strings need their own).
  QFLOW_ASSIGN_OR_RETURN(Tensor out, first.dtype() == DType::String ? make_output(context, first.dtype(), out_shape)
                                                                    : context.allocate(first.dtype(), out_shape));
  const int64_t outer = dims_product(out_shape, 0, axis);
  const std::size_t inner_bytes = static_cast<std::size_t>(dims_product(out_shape, axis + 1, out_shape.size())) *
                                  dtype_size(first.dtype());
  std::byte* dst = out.raw_data();
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor* t : inputs) {
      const std::size_t block = static_cast<std::size_t>(t->shape()[axis]) * inner_bytes;
      if (block == 0) continue;
      std::memcpy(dst, t->raw_data() + static_cast<std::size_t>(o) * block, block);
      dst += block;
    }
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status split(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  auto axis_or = normalize_axis(context.node.attr_int("axis", 0), data->rank());
  if (!axis_or) return context.error(axis_or.status().message());
  const std::size_t axis = static_cast<std::size_t>(*axis_or);
  const int64_t dim = data->shape()[axis];
  const int64_t count = static_cast<int64_t>(context.outputs.size());
  std::vector<int64_t> sizes;
  const Tensor* split_input = context.opset >= 13 || context.opset == 1 ? context.input(1) : nullptr;
  if (split_input) {
    QFLOW_ASSIGN_OR_RETURN(sizes, read_ints(context, *split_input, "split"));
  } else if (context.opset < 13) {
    sizes = context.node.attr_ints("split");
  }
  if (sizes.empty()) {
    if (count == 0) return context.error("no outputs");
    const int64_t chunk = (dim + count - 1) / count;
    // Opset 18 lets the last chunk be smaller; earlier opsets require an even split.
    if (dim % count != 0 && context.opset < 18)
      return context.error("axis of size " + std::to_string(dim) + " cannot be split into " + std::to_string(count) +
                           " equal parts");
    for (int64_t i = 0; i < count; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  if (static_cast<int64_t>(sizes.size()) != count)
    return context.error("split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(count) +
                         " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return context.error("split sizes must not be negative");
    total += s;
  }
  if (total != dim)
    return context.error("split sizes sum to " + std::to_string(total) + ", axis has size " + std::to_string(dim));
  const int64_t outer = dims_product(data->shape(), 0, axis);
  const std::size_t inner_bytes =
      static_cast<std::size_t>(dims_product(data->shape(), axis + 1, data->shape().size())) * dtype_size(data->dtype());
  const std::size_t row_bytes = static_cast<std::size_t>(dim) * inner_bytes;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Shape shape = data->shape();
    shape[axis] = sizes[i];
    QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), shape));
    const std::size_t block = static_cast<std::size_t>(sizes[i]) * inner_bytes;
    if (block > 0) {
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(out.raw_data() + static_cast<std::size_t>(o) * block,
                    data->raw_data() + static_cast<std::size_t>(o) * row_bytes + offset, block);
    }
    offset += block;
    context.outputs[i] = std::move(out);
  }
  return Status::ok();
}

Status slice(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t rank = data->rank();
  std::vector<int64_t> starts, ends, axes, steps;
  bool have_axes = false;
  if (context.opset < 10) {
    const Attribute* s = context.node.find_attribute("starts");
    const Attribute* e = context.node.find_attribute("ends");
    if (!s || !e) return context.error("attributes 'starts' and 'ends' are required");
    starts = s->ints;
    ends = e->ints;
    if (const Attribute* a = context.node.find_attribute("axes")) {
      axes = a->ints;
      have_axes = true;
    }
  } else {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* s, context.required_input(1));
    QFLOW_ASSIGN_OR_RETURN(const Tensor* e, context.required_input(2));
    QFLOW_ASSIGN_OR_RETURN(starts, read_ints(context, *s, "starts"));
    QFLOW_ASSIGN_OR_RETURN(ends, read_ints(context, *e, "ends"));
    if (const Tensor* a = context.input(3)) {
      QFLOW_ASSIGN_OR_RETURN(axes, read_ints(context, *a, "axes"));
      have_axes = true;
    }
    if (const Tensor* st = context.input(4)) {
      QFLOW_ASSIGN_OR_RETURN(steps, read_ints(context, *st, "steps"));
    }
  }
  if (!have_axes)
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return context.error("starts, ends, axes and steps must have the same length");
  QFLOW_ASSIGN_OR_RETURN(axes, normalize_axes(context, axes, rank));
  std::vector<int64_t> begin(static_cast<std::size_t>(rank), 0), step(static_cast<std::size_t>(rank), 1);
  Shape out_shape = data->shape();
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t d = static_cast<std::size_t>(axes[i]);
    const int64_t dim = data->shape()[d];
    const int64_t st = steps[i];
    if (st == 0) return context.error("steps must not be zero");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out_shape[d] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out_shape[d] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[d] = s;
    step[d] = st;
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  std::vector<std::vector<int64_t>> maps(static_cast<std::size_t>(rank));
  for (std::size_t d = 0; d < maps.size(); ++d)
    for (int64_t o = 0; o < out_shape[d]; ++o) maps[d].push_back(begin[d] + o * step[d]);
  QFLOW_RETURN_IF_ERROR(remap_axes(context, *data, out, maps, nullptr));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status transpose(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t rank = data->rank();
  std::vector<int64_t> perm = context.node.attr_ints("perm");
  if (perm.empty())
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return context.error("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  QFLOW_ASSIGN_OR_RETURN(perm, normalize_axes(context, perm, rank));
  QFLOW_ASSIGN_OR_RETURN(context.outputs[0], shape_detail::transpose(context, *data, perm));
  return Status::ok();
}

// Beyond this a pad cannot describe a tensor that fits in memory; checked before adding.
constexpr int64_t kMaxPad = int64_t{1} << 40;

// Input coordinate for output coordinate o of a padded axis; -1 selects the constant.
int64_t pad_source(int64_t o, int64_t before, int64_t dim, const std::string& mode) {
  const int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "reflect") {
    if (dim == 1) return 0;
    const int64_t period = 2 * (dim - 1);
    const int64_t m = ((i % period) + period) % period;
    return m < dim ? m : period - m;
  }
  return -1;
}

Status pad(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t rank = data->rank();
  const std::string mode = context.node.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return unsupported(context.node.op_type() + " '" + context.node.name() + "': mode '" + mode + "' is not supported");
  std::vector<int64_t> pads, axes;
  Tensor fill = Tensor(data->dtype(), {});
  if (context.opset < 11) {
    pads = context.node.attr_ints(context.opset < 2 ? "paddings" : "pads");
    fill = Tensor::scalar<float>(context.node.attr_float("value", 0.0f)).cast(data->dtype());
  } else {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* p, context.required_input(1));
    QFLOW_ASSIGN_OR_RETURN(pads, read_ints(context, *p, "pads"));
    if (const Tensor* v = context.input(2)) {
      if (v->numel() > 1) return context.error("constant_value must be a scalar");
      if (v->numel() == 1) fill = v->dtype() == data->dtype() ? *v : v->cast(data->dtype());
    }
    if (const Tensor* a = context.input(3)) {
      QFLOW_ASSIGN_OR_RETURN(axes, read_ints(context, *a, "axes"));
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  QFLOW_ASSIGN_OR_RETURN(axes, normalize_axes(context, axes, rank));
  if (pads.size() != 2 * axes.size())
    return context.error("pads has " + std::to_string(pads.size()) + " entries, expected " +
                         std::to_string(2 * axes.size()));
  std::vector<int64_t> before(static_cast<std::size_t>(rank), 0), after(static_cast<std::size_t>(rank), 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    before[static_cast<std::size_t>(axes[i])] = pads[i];
    after[static_cast<std::size_t>(axes[i])] = pads[i + axes.size()];
  }
  Shape out_shape(static_cast<std::size_t>(rank));
  for (std::size_t d = 0; d < out_shape.size(); ++d) {
    const int64_t dim = data->shape()[d];
    if (std::max(std::abs(before[d]), std::abs(after[d])) > kMaxPad)
      return context.error("pads on axis " + std::to_string(d) + " are implausibly large");
    out_shape[d] = dim + before[d] + after[d];
    if (out_shape[d] < 0) return context.error("pads remove more than axis " + std::to_string(d) + " holds");
    if (dim == 0 && mode != "constant" && out_shape[d] > 0)
      return context.error("mode '" + mode + "' cannot pad the empty axis " + std::to_string(d));
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  std::vector<std::vector<int64_t>> maps(static_cast<std::size_t>(rank));
  for (std::size_t d = 0; d < out_shape.size(); ++d)
    for (int64_t o = 0; o < out_shape[d]; ++o) maps[d].push_back(pad_source(o, before[d], data->shape()[d], mode));
  QFLOW_RETURN_IF_ERROR(remap_axes(context, *data, out, maps, fill.raw_data()));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status expand(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* shape, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_ints(context, *shape, "shape"));
  auto out_or = broadcast_shapes(data->shape(), dims);
  if (!out_or) return context.error(out_or.status().message());
  const Shape& out_shape = *out_or;
  Shape in_shape(out_shape.size() - data->shape().size(), 1);
  in_shape.insert(in_shape.end(), data->shape().begin(), data->shape().end());
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  std::vector<std::vector<int64_t>> maps(out_shape.size());
  for (std::size_t d = 0; d < out_shape.size(); ++d)
    for (int64_t o = 0; o < out_shape[d]; ++o) maps[d].push_back(in_shape[d] == 1 ? 0 : o);
  QFLOW_RETURN_IF_ERROR(remap_axes(context, data->reshaped(in_shape), out, maps, nullptr));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status tile(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* repeats_input, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, read_ints(context, *repeats_input, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != data->rank())
    return context.error("repeats has " + std::to_string(repeats.size()) + " entries for rank " +
                         std::to_string(data->rank()));
  Shape out_shape(repeats.size());
  for (std::size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return context.error("repeats must not be negative");
    if (__builtin_mul_overflow(data->shape()[d], repeats[d], &out_shape[d]))
      return context.error("repeats overflow the size of axis " + std::to_string(d));
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  std::vector<std::vector<int64_t>> maps(repeats.size());
  for (std::size_t d = 0; d < repeats.size(); ++d)
    for (int64_t o = 0; o < out_shape[d]; ++o) maps[d].push_back(o % data->shape()[d]);
  QFLOW_RETURN_IF_ERROR(remap_axes(context, *data, out, maps, nullptr));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status trilu(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  if (data->rank() < 2) return context.error("input must have rank 2 or more");
  int64_t k = 0;
  if (const Tensor* kt = context.input(1)) {
    if (kt->numel() != 1) return context.error("k must be a scalar");
    QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> kv, read_ints(context, *kt, "k"));
    k = kv[0];
  }
  const bool upper = context.node.attr_int("upper", 1) != 0;
  Tensor out = data->clone();
  const int64_t rows = data->dim(data->rank() - 2), cols = data->dim(data->rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : data->numel() / (rows * cols);
  const std::size_t size = dtype_size(data->dtype());
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const bool keep = upper ? c - r >= k : c - r <= k;
        if (!keep) std::memset(out.raw_data() + static_cast<std::size_t>((m * rows + r) * cols + c) * size, 0, size);
      }
    }
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status depth_to_space(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t b = context.node.attr_int("blocksize", 0);
  if (data->rank() != 4) return context.error("input must be 4-D, got " + shape_to_string(data->shape()));
  const int64_t n = data->dim(0), c = data->dim(1), h = data->dim(2), w = data->dim(3);
  if (b <= 0 || c % (b * b) != 0)
    return context.error("channels " + std::to_string(c) + " are not divisible by blocksize^2 (blocksize " +
                         std::to_string(b) + ")");
  const std::string mode = context.node.attr_string("mode", "DCR");
  Tensor view;
  std::vector<int64_t> perm;
  if (mode == "DCR") {
    view = data->reshaped({n, b, b, c / (b * b), h, w});
    perm = {0, 3, 4, 1, 5, 2};
  } else if (mode == "CRD") {
    view = data->reshaped({n, c / (b * b), b, b, h, w});
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    return context.error("mode '" + mode + "' is not DCR or CRD");
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, shape_detail::transpose(context, view, perm));
  context.outputs[0] = out.reshaped({n, c / (b * b), h * b, w * b});
  return Status::ok();
}

Status space_to_depth(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t b = context.node.attr_int("blocksize", 0);
  if (data->rank() != 4) return context.error("input must be 4-D, got " + shape_to_string(data->shape()));
  const int64_t n = data->dim(0), c = data->dim(1), h = data->dim(2), w = data->dim(3);
  if (b <= 0 || h % b != 0 || w % b != 0)
    return context.error("spatial size " + std::to_string(h) + "x" + std::to_string(w) +
                         " is not divisible by blocksize " + std::to_string(b));
  const Tensor view = data->reshaped({n, c, h / b, b, w / b, b});
  QFLOW_ASSIGN_OR_RETURN(Tensor out, shape_detail::transpose(context, view, {0, 3, 5, 1, 2, 4}));
  context.outputs[0] = out.reshaped({n, c * b * b, h / b, w / b});
  return Status::ok();
}

}  // namespace

void register_movement_kernels(KernelRegistry& registry) {
  registry.add_function("", "Concat", 1, kLatestOpset, concat);
  registry.add_function("", "Split", 1, kLatestOpset, split);
  registry.add_function("", "Slice", 1, kLatestOpset, slice);
  registry.add_function("", "Transpose", 1, kLatestOpset, transpose);
  registry.add_function("", "Pad", 1, kLatestOpset, pad);
  registry.add_function("", "Expand", 8, kLatestOpset, expand);
  registry.add_function("", "Tile", 6, kLatestOpset, tile);
  registry.add_function("", "Trilu", 14, kLatestOpset, trilu);
  registry.add_function("", "DepthToSpace", 1, kLatestOpset, depth_to_space);
  registry.add_function("", "SpaceToDepth", 1, kLatestOpset, space_to_depth);
}

}  // namespace qflow
