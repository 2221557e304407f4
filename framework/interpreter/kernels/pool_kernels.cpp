// Reference kernels for MaxPool, AveragePool, LpPool, their global forms and MaxUnpool, N-d.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/conv_geometry.h"

namespace qflow {

namespace {

enum class PoolKind { Max, Average, Lp };

struct PoolOptions {
  PoolKind kind = PoolKind::Max;
  bool count_include_pad = false;
  bool column_major_indices = false;  // MaxPool storage_order = 1
  double p = 2.0;                     // LpPool
};

// The part of one window that lies inside the image, as per-axis ranges of kernel taps.
struct Window {
  std::vector<int64_t> start;  // image coordinate of tap 0 (may be negative)
  std::vector<int64_t> lo, hi; // taps [lo, hi) land inside the image
  int64_t padded_count = 1;    // taps inside the padded image, for count_include_pad
};

void place_window(const ConvGeometry& g, const std::vector<int64_t>& out_pos, Window& w) {
  w.padded_count = 1;
  for (std::size_t d = 0; d < g.kernel.size(); ++d) {
    const int64_t start = out_pos[d] * g.strides[d] - g.pads_begin[d], dil = g.dilations[d];
    const int64_t in = g.in_spatial[d], k = g.kernel[d];
    w.start[d] = start;
    // Taps inside [-pads_begin, in + pads_end): the padded image, not beyond it (ceil_mode).
    const int64_t limit = in + g.pads_end[d] - start;
    int64_t padded_hi = 0;
    if (dil == 1) {  // the common case, without the divisions: this runs once per output
      w.lo[d] = start >= 0 ? 0 : -start;
      w.hi[d] = in - start > 0 ? std::min(k, in - start) : 0;
      padded_hi = limit > 0 ? std::min(k, limit) : 0;
    } else {
      w.lo[d] = start >= 0 ? 0 : (-start + dil - 1) / dil;
      w.hi[d] = in - start > 0 ? std::min(k, (in - start - 1) / dil + 1) : 0;
      padded_hi = limit > 0 ? std::min(k, (limit - 1) / dil + 1) : 0;
    }
    if (w.hi[d] < w.lo[d]) w.hi[d] = w.lo[d];
    w.padded_count *= padded_hi;
  }
}

// Calls f(row_major_index_in_plane) for every tap of the window inside the image.
template <typename F>
void visit_window(const ConvGeometry& g, const Window& w, std::vector<int64_t>& tap, F&& f) {
  const std::size_t rank = g.kernel.size();
  for (std::size_t d = 0; d < rank; ++d)
    if (w.lo[d] >= w.hi[d]) return;
  for (std::size_t d = 0; d < rank; ++d) tap[d] = w.lo[d];
  while (true) {
    int64_t index = 0;
    for (std::size_t d = 0; d < rank; ++d) index = index * g.in_spatial[d] + w.start[d] + tap[d] * g.dilations[d];
    f(index);
    std::size_t d = rank;
    while (d-- > 0) {
      if (++tap[d] < w.hi[d]) break;
      tap[d] = w.lo[d];
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

// One plane of a 2-D max or average pool without indices: the same windows, taps and
// arithmetic as the generic loop, with the taps of a window row read straight from the
// input row instead of through visit_window's index vector.
// Outputs [first, last) of axis d whose whole window lies inside the image.
std::pair<int64_t, int64_t> interior(const ConvGeometry& g, std::size_t d) {
  const int64_t s = g.strides[d], pad = g.pads_begin[d], reach = (g.kernel[d] - 1) * g.dilations[d];
  const int64_t first = (pad + s - 1) / s;
  const int64_t last = g.in_spatial[d] - 1 - reach + pad >= 0 ? (g.in_spatial[d] - 1 - reach + pad) / s + 1 : 0;
  return {std::min(first, g.out_spatial[d]), std::clamp(last, first, g.out_spatial[d])};
}

template <typename T>
void pool_plane_2d(const T* in, T* out, const ConvGeometry& g, bool max, bool count_include_pad, Window& w,
                   std::vector<int64_t>& out_pos) {
  const int64_t iw = g.in_spatial[1], dy = g.dilations[0], dx = g.dilations[1];
  const auto [y_first, y_last] = interior(g, 0);
  const auto [x_first, x_last] = interior(g, 1);
  for (int64_t oy = 0; oy < g.out_spatial[0]; ++oy) {
    for (int64_t ox = 0; ox < g.out_spatial[1]; ++ox) {
      if (max && oy >= y_first && oy < y_last && ox >= x_first && ox < x_last) {
        // A window inside the image: the generic loop's taps in its order, without placing
        // the window (which cost more than the taps of a 3x3 window).
        const T* corner = in + (oy * g.strides[0] - g.pads_begin[0]) * iw + ox * g.strides[1] - g.pads_begin[1];
        T best = corner[0];
        for (int64_t ty = 0; ty < g.kernel[0]; ++ty) {
          const T* row = corner + ty * dy * iw;
          for (int64_t tx = 0; tx < g.kernel[1]; ++tx)
            if (row[tx * dx] > best) best = row[tx * dx];
        }
        *out++ = best;
        continue;
      }
      out_pos[0] = oy;
      out_pos[1] = ox;
      place_window(g, out_pos, w);
      const bool empty = w.lo[0] >= w.hi[0] || w.lo[1] >= w.hi[1];
      if (max) {
        T best = std::numeric_limits<T>::lowest();
        bool any = false;
        for (int64_t ty = empty ? w.hi[0] : w.lo[0]; ty < w.hi[0]; ++ty) {
          const T* row = in + (w.start[0] + ty * dy) * iw + w.start[1];
          for (int64_t tx = w.lo[1]; tx < w.hi[1]; ++tx) {
            const T v = row[tx * dx];
            if (!any || v > best) {
              best = v;
              any = true;
            }
          }
        }
        *out++ = best;
      } else {
        double sum = 0;
        int64_t count = 0;
        for (int64_t ty = empty ? w.hi[0] : w.lo[0]; ty < w.hi[0]; ++ty) {
          const T* row = in + (w.start[0] + ty * dy) * iw + w.start[1];
          for (int64_t tx = w.lo[1]; tx < w.hi[1]; ++tx) sum += static_cast<double>(row[tx * dx]);
          count += w.hi[1] - w.lo[1];
        }
        const int64_t divisor = count_include_pad ? w.padded_count : count;
        *out++ = divisor > 0 ? static_cast<T>(sum / static_cast<double>(divisor)) : T(0);
      }
    }
  }
}

// One plane of a global max or average pool: the window is the whole plane, read as one run.
// The average sums in double in kLanes interleaved partial sums (element i into sum i mod
// kLanes, then the sums in order), a fixed order the compiler turns into vector adds instead
// of one add chain as long as the plane.
template <typename T>
T global_pool_plane(const T* in, int64_t n, bool max) {
  if (max) {
    T best = std::numeric_limits<T>::lowest();
    for (int64_t i = 0; i < n; ++i)
      if (i == 0 || in[i] > best) best = in[i];
    return best;
  }
  constexpr int64_t kLanes = 8;
  double partial[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) partial[j] += static_cast<double>(in[i + j]);
  for (int64_t j = 0; i < n; ++i, ++j) partial[j] += static_cast<double>(in[i]);
  double sum = 0;
  for (double p : partial) sum += p;
  return n > 0 ? static_cast<T>(sum / static_cast<double>(n)) : T(0);
}

// Row-major plane index to the column-major one MaxPool reports for storage_order = 1.
int64_t to_column_major(const ConvGeometry& g, int64_t index) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> coord(g.in_spatial.size());
  for (std::size_t d = g.in_spatial.size(); d-- > 0;) {
    coord[d] = index % g.in_spatial[d];
    index /= g.in_spatial[d];
  }
  for (std::size_t d = 0; d < coord.size(); ++d) {
    result += coord[d] * stride;
    stride *= g.in_spatial[d];
  }
  return result;
}

template <typename T>
Status run_pool(KernelContext& context, const ConvGeometry& g, const PoolOptions& options, bool global) {
  const Tensor& x = *context.inputs[0];
  // Every output element is computed: a dead buffer of the run will do.
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(x.dtype(), g.column_shape()));
  const bool want_indices = context.outputs.size() > 1 && context.node.output(1) != nullptr;
  Tensor indices = want_indices ? Tensor(DType::Int64, g.column_shape()) : Tensor();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), rank = g.rank();
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  int64_t* id = want_indices ? indices.data<int64_t>() : nullptr;

  // One (batch, channel) plane per unit: each output has a single writer.
  const int64_t plane_cost = out_size * g.kernel_size();
  context.parallel_for(g.batch * g.in_channels, plane_cost, [&](int64_t begin, int64_t end) {
    Window w{std::vector<int64_t>(rank), std::vector<int64_t>(rank), std::vector<int64_t>(rank), 1};
    std::vector<int64_t> out_pos(rank), tap(rank);
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* in = xd + plane * in_size;
      if (global && !id && options.kind != PoolKind::Lp) {
        yd[plane] = global_pool_plane(in, in_size, options.kind == PoolKind::Max);
        continue;
      }
      if (rank == 2 && !id && options.kind != PoolKind::Lp) {
        pool_plane_2d(in, yd + plane * out_size, g, options.kind == PoolKind::Max, options.count_include_pad, w,
                      out_pos);
        continue;
      }
      std::fill(out_pos.begin(), out_pos.end(), 0);
      for (int64_t o = 0; o < out_size; ++o) {
        place_window(g, out_pos, w);
        const int64_t at = plane * out_size + o;
        if (options.kind == PoolKind::Max) {
          T best = std::numeric_limits<T>::lowest();
          int64_t best_index = -1;
          visit_window(g, w, tap, [&](int64_t i) {
            if (best_index < 0 || in[i] > best) {
              best = in[i];
              best_index = i;
            }
          });
          yd[at] = best;
          if (id) {
            const int64_t local = options.column_major_indices && best_index >= 0 ? to_column_major(g, best_index)
                                                                                   : best_index;
            id[at] = plane * in_size + local;
          }
        } else if (options.kind == PoolKind::Average) {
          double sum = 0;
          int64_t count = 0;
          visit_window(g, w, tap, [&](int64_t i) {
            sum += static_cast<double>(in[i]);
            ++count;
          });
          const int64_t divisor = options.count_include_pad ? w.padded_count : count;
          yd[at] = divisor > 0 ? static_cast<T>(sum / static_cast<double>(divisor)) : T(0);
        } else {
          double sum = 0;
          visit_window(g, w, tap, [&](int64_t i) { sum += std::pow(std::fabs(static_cast<double>(in[i])), options.p); });
          yd[at] = static_cast<T>(std::pow(sum, 1.0 / options.p));
        }
        for (int64_t d = rank; d-- > 0;) {
          const std::size_t ds = static_cast<std::size_t>(d);
          if (++out_pos[ds] < g.out_spatial[ds]) break;
          out_pos[ds] = 0;
        }
      }
    }
  });
  context.outputs[0] = std::move(y);
  if (want_indices) context.outputs[1] = std::move(indices);
  return Status::ok();
}

double lp_norm_order(const Node& node) {
  // LpPool-1 declared p as a float; later opsets as an int.
  const Attribute* p = node.find_attribute("p");
  if (!p) return 2.0;
  return p->type == AttributeType::Float ? static_cast<double>(p->f) : static_cast<double>(p->i);
}

Status pool(KernelContext& context, PoolKind kind, bool global, ConvAttributes attrs, const PoolOptions& options) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  if (global) {
    if (x->rank() < 3) return context.error("input shape " + shape_to_string(x->shape()) + " needs rank 3 or more");
    attrs.kernel_shape.assign(x->shape().begin() + 2, x->shape().end());
  } else if (attrs.kernel_shape.empty()) {
    return context.error("attribute kernel_shape is required");
  }
  auto geometry = make_pool_geometry(attrs, x->shape());
  if (!geometry) return context.error(geometry.status().message());
  if (kind == PoolKind::Lp && !(options.p > 0)) return context.error("p must be positive");
  if (kind == PoolKind::Max)
    return dispatch_numeric(x->dtype(), [&]<typename T>() { return run_pool<T>(context, *geometry, options, global); });
  return dispatch_float(x->dtype(), [&]<typename T>() { return run_pool<T>(context, *geometry, options, global); });
}

// The node's attributes are read once, when its kernel is created.
KernelFactory pool_kernel(PoolKind kind, bool global) {
  return bound_kernel([kind, global](const Node& node, int64_t) -> KernelFunction {
    const ConvAttributes attrs = global ? ConvAttributes{} : read_conv_attributes(node);
    PoolOptions options;
    options.kind = kind;
    options.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
    options.column_major_indices = node.attr_int("storage_order", 0) != 0;
    if (kind == PoolKind::Lp) options.p = lp_norm_order(node);
    return [=](KernelContext& context) { return pool(context, kind, global, attrs, options); };
  });
}

// MaxUnpool scatters pooled values back to the positions MaxPool's indices name. Indices
// address the natural unpooled shape; a larger output_shape keeps each value at the same
// coordinates (the ONNX reference behaviour), so indices are re-encoded for it.
template <typename T>
Status run_max_unpool(KernelContext& context, const Tensor& x, const Tensor& indices, const Shape& natural,
                      const Shape& out_shape) {
  auto made = Tensor::make(x.dtype(), out_shape);
  if (!made) return context.error(made.status().message());
  Tensor y = std::move(made).value();
  const T* xd = x.data<T>();
  const int64_t* id = indices.data<int64_t>();
  T* yd = y.data<T>();
  const int64_t limit = shape_numel(natural);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (id[i] < 0 || id[i] >= limit)
      return context.error("index " + std::to_string(id[i]) + " is outside the unpooled shape " +
                           shape_to_string(natural));
    int64_t rest = id[i], target = 0, stride = 1;
    for (std::size_t d = natural.size(); d-- > 0;) {
      const int64_t coord = rest % natural[d];
      rest /= natural[d];
      if (coord >= out_shape[d])
        return context.error("index " + std::to_string(id[i]) + " falls outside output_shape " +
                             shape_to_string(out_shape));
      target += coord * stride;
      stride *= out_shape[d];
    }
    yd[target] = xd[i];
  }
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status max_unpool(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  const Tensor* output_shape = context.input(2);
  if (indices->dtype() != DType::Int64 || indices->shape() != x->shape())
    return context.error("indices must be int64 with the shape of X " + shape_to_string(x->shape()) + ", got " +
                         std::string(dtype_name(indices->dtype())) + " " + shape_to_string(indices->shape()));
  const ConvAttributes attrs = read_conv_attributes(context.node);
  if (x->rank() < 3) return context.error("input shape " + shape_to_string(x->shape()) + " needs rank 3 or more");
  const std::size_t rank = static_cast<std::size_t>(x->rank() - 2);
  if (attrs.kernel_shape.size() != rank) return context.error("kernel_shape does not match the spatial rank");
  if ((!attrs.strides.empty() && attrs.strides.size() != rank) || (!attrs.pads.empty() && attrs.pads.size() != 2 * rank))
    return context.error("strides or pads do not match the spatial rank");
  Shape out_shape{x->dim(0), x->dim(1)};
  for (std::size_t d = 0; d < rank; ++d) {
    const int64_t stride = attrs.strides.empty() ? 1 : attrs.strides[d];
    const int64_t pads = attrs.pads.empty() ? 0 : attrs.pads[d] + attrs.pads[d + rank];
    out_shape.push_back((x->dim(static_cast<int64_t>(d) + 2) - 1) * stride + attrs.kernel_shape[d] - pads);
  }
  const Shape natural = out_shape;
  for (int64_t v : natural)
    if (v <= 0) return context.error("unpooled shape " + shape_to_string(natural) + " is not positive");
  if (output_shape) {
    const std::vector<int64_t> given = output_shape->to_int64s();
    if (given.size() != out_shape.size())
      return context.error("output_shape " + shape_to_string(given) + " does not match the input rank");
    out_shape = given;
  }
  return dispatch_numeric(x->dtype(), [&]<typename T>() {
    return run_max_unpool<T>(context, *x, *indices, natural, out_shape);
  });
}

}  // namespace

void register_pool_kernels(KernelRegistry& registry) {
  registry.add("", "MaxPool", 1, kLatestOpset, pool_kernel(PoolKind::Max, false));
  registry.add("", "AveragePool", 1, kLatestOpset, pool_kernel(PoolKind::Average, false));
  registry.add("", "LpPool", 1, kLatestOpset, pool_kernel(PoolKind::Lp, false));
  registry.add("", "GlobalMaxPool", 1, kLatestOpset, pool_kernel(PoolKind::Max, true));
  registry.add("", "GlobalAveragePool", 1, kLatestOpset, pool_kernel(PoolKind::Average, true));
  registry.add("", "GlobalLpPool", 1, kLatestOpset, pool_kernel(PoolKind::Lp, true));
  registry.add_function("", "MaxUnpool", 9, kLatestOpset, max_unpool);
}

}  // namespace qflow
