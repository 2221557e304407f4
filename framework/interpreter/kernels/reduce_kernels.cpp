// Reduction kernels: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"

namespace qflow {

namespace {

// Below this many input elements a reduction runs on the calling thread.
constexpr int64_t kParallelGrain = 1 << 15;

// Dispatch failures do not know the node; name it.
Status name_node(const KernelContext& ctx, Status status) {
  if (status.code() != StatusCode::Unsupported) return status;
  return status.with_context(ctx.node.op_type() + " '" + ctx.node.name() + "'");
}

enum class Reduce { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// Each output element reduces the same set of input offsets from its own base offset, in
// row-major order of the reduced dims; outputs are independent, so splitting them across
// threads leaves every result bit-identical.
struct ReducePlan {
  Shape out_shape;
  int64_t out_count = 0;
  std::vector<int64_t> offsets;       // of the reduced elements, relative to an output's base
  bool contiguous = false;            // offsets are 0, 1, 2, ...
  int64_t inner = 1;                  // trailing kept dims: consecutive outputs, consecutive inputs
  std::vector<int64_t> kept_dims;     // non-reduced input dims, in order
  std::vector<int64_t> kept_strides;  // their input strides

  int64_t base(int64_t out_index) const {
    int64_t offset = 0;
    for (std::size_t d = kept_dims.size(); d-- > 0;) {
      offset += (out_index % kept_dims[d]) * kept_strides[d];
      out_index /= kept_dims[d];
    }
    return offset;
  }
};

ReducePlan make_plan(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  ReducePlan plan;
  const std::vector<int64_t> strides = contiguous_strides(in);
  std::vector<int64_t> reduced_dims, reduced_strides;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      if (keepdims) plan.out_shape.push_back(1);
      reduced_dims.push_back(in[d]);
      reduced_strides.push_back(strides[d]);
    } else {
      plan.out_shape.push_back(in[d]);
      plan.kept_dims.push_back(in[d]);
      plan.kept_strides.push_back(strides[d]);
    }
  }
  plan.out_count = shape_numel(plan.out_shape);
  for (std::size_t d = in.size(); d-- > 0 && !reduced[d];) plan.inner *= in[d];
  int64_t count = 1;
  for (int64_t dim : reduced_dims) count *= dim;
  plan.offsets.reserve(static_cast<std::size_t>(count));
  std::vector<int64_t> index(reduced_dims.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * reduced_strides[d];
    plan.offsets.push_back(offset);
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < reduced_dims[d]) break;
      index[d] = 0;
    }
  }
  plan.contiguous = true;
  for (int64_t i = 0; i < count; ++i)
    if (plan.offsets[static_cast<std::size_t>(i)] != i) plan.contiguous = false;
  return plan;
}

template <Reduce kind, typename T>
constexpr bool kWideFloat = std::is_floating_point_v<T> || kind == Reduce::Mean || kind == Reduce::L2 ||
                            kind == Reduce::LogSum || kind == Reduce::LogSumExp;

// Floats accumulate in double; integers in 64-bit unsigned so overflow wraps as in hardware.
template <Reduce kind, typename T>
using Accumulator = std::conditional_t<kWideFloat<kind, T>, double, uint64_t>;

template <typename Acc, typename T>
Acc widen(T v) {
  if constexpr (std::is_same_v<Acc, double>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <typename T, typename Acc>
T narrow(Acc v) {
  if constexpr (std::is_same_v<Acc, double>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// init / step / finish of one reduction; every output folds its elements in the same order
// whichever loop drives it, so the row-wise and per-output paths agree bit for bit.
template <Reduce kind, typename T>
struct Reducer {
  static constexpr bool kExtremum = kind == Reduce::Max || kind == Reduce::Min;
  using Acc = std::conditional_t<kExtremum, T, Accumulator<kind, T>>;

  static Acc init() {
    if constexpr (kind == Reduce::Max) {
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    } else if constexpr (kind == Reduce::Min) {
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    } else {
      return kind == Reduce::Prod ? Acc(1) : Acc(0);
    }
  }

  static void step(Acc& acc, T x) {
    if constexpr (kExtremum) {
      if constexpr (std::is_floating_point_v<T>) {
        // NaN wins and stays, as in numpy.
        if (std::isnan(acc)) return;
        if (std::isnan(x)) {
          acc = x;
          return;
        }
      }
      if (kind == Reduce::Max ? x > acc : x < acc) acc = x;
    } else {
      const Acc v = widen<Acc>(x);
      if constexpr (kind == Reduce::Sum || kind == Reduce::Mean || kind == Reduce::LogSum) acc += v;
      if constexpr (kind == Reduce::Prod) acc *= v;
      if constexpr (kind == Reduce::SumSquare || kind == Reduce::L2) acc += v * v;
      if constexpr (kind == Reduce::L1) {
        if constexpr (std::is_same_v<Acc, double>) {
          acc += std::abs(v);
        } else if constexpr (std::is_signed_v<T>) {
          acc += x < 0 ? Acc(0) - v : v;
        } else {
          acc += v;
        }
      }
    }
  }

  static T finish(Acc acc, int64_t count) {
    if constexpr (kExtremum) {
      return acc;
    } else {
      if constexpr (kind == Reduce::Mean) return static_cast<T>(acc / static_cast<double>(count));
      if constexpr (kind == Reduce::L2) return static_cast<T>(std::sqrt(acc));
      if constexpr (kind == Reduce::LogSum) return static_cast<T>(std::log(acc));
      return narrow<T>(acc);
    }
  }
};

template <Reduce kind, typename T, typename At>
T reduce_one(int64_t count, At at) {
  if constexpr (kind == Reduce::LogSumExp) {
    double peak = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < count; ++j) peak = std::max(peak, static_cast<double>(at(j)));
    if (!std::isfinite(peak)) {
      double sum = 0;
      for (int64_t j = 0; j < count; ++j) sum += std::exp(static_cast<double>(at(j)));
      return static_cast<T>(std::log(sum));
    }
    // Shifting by the maximum keeps exp from overflowing.
    double sum = 0;
    for (int64_t j = 0; j < count; ++j) sum += std::exp(static_cast<double>(at(j)) - peak);
    return static_cast<T>(peak + std::log(sum));
  } else {
    using R = Reducer<kind, T>;
    typename R::Acc acc = R::init();
    for (int64_t j = 0; j < count; ++j) R::step(acc, at(j));
    return R::finish(acc, count);
  }
}

// Axes from the `axes` input (ReduceSum from opset 13, the others from 18) or attribute.
Expected<std::vector<int64_t>> read_axes(const KernelContext& ctx) {
  if (const Tensor* axes = ctx.input(1)) {
    if (axes->dtype() != DType::Int64) return ctx.error("axes must be int64, got " + std::string(dtype_name(axes->dtype())));
    return axes->to_int64s();
  }
  return ctx.node.attr_ints("axes", {});
}

template <Reduce kind>
Status reduce_kernel(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  const Tensor input = (x->dtype() == DType::Float16 || x->dtype() == DType::BFloat16) ? x->cast(DType::Float32) : *x;
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axes, read_axes(ctx));
  const bool keepdims = ctx.node.attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.node.attr_int("noop_with_empty_axes", 0) != 0) {
    ctx.outputs[0] = x->clone();
    return Status::ok();
  }
  std::vector<bool> reduced(input.shape().size(), axes.empty());
  for (int64_t axis : axes) {
    auto normalized = normalize_axis(axis, input.rank());
    if (!normalized) return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(input.rank()));
    if (reduced[static_cast<std::size_t>(*normalized)]) return ctx.error("axis " + std::to_string(axis) + " appears twice");
    reduced[static_cast<std::size_t>(*normalized)] = true;
  }
  const ReducePlan plan = make_plan(input.shape(), reduced, keepdims);
  QFLOW_RETURN_IF_ERROR(name_node(ctx, dispatch_numeric(input.dtype(), [&]<typename T>() -> Status {
    Tensor out(input.dtype(), plan.out_shape);
    const T* in = input.data<T>();
    T* po = out.data<T>();
    const int64_t count = static_cast<int64_t>(plan.offsets.size());
    const int64_t* offsets = plan.offsets.data();
    const int64_t inner = plan.inner;
    if constexpr (kind != Reduce::LogSumExp) {
      if (inner > 1 && count > 1) {
        // Reducing over outer axes: sweep whole input rows into a row of accumulators so
        // memory is read sequentially instead of one strided column per output.
        using R = Reducer<kind, T>;
        auto rows = [&](int64_t begin, int64_t end) {
          std::vector<typename R::Acc> acc(static_cast<std::size_t>(inner));
          for (int64_t row = begin; row < end; ++row) {
            const T* base = in + plan.base(row * inner);
            std::fill(acc.begin(), acc.end(), R::init());
            for (int64_t j = 0; j < count; ++j) {
              const T* p = base + offsets[j];
              for (int64_t i = 0; i < inner; ++i) R::step(acc[static_cast<std::size_t>(i)], p[i]);
            }
            T* o = po + row * inner;
            for (int64_t i = 0; i < inner; ++i) o[i] = R::finish(acc[static_cast<std::size_t>(i)], count);
          }
        };
        const int64_t row_count = plan.out_count / inner;
        if (input.numel() >= kParallelGrain && row_count > 1) {
          ctx.parallel_for(row_count, count * inner, rows);
        } else {
          rows(0, row_count);
        }
        ctx.outputs[0] = std::move(out);
        return Status::ok();
      }
    }
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* base = in + plan.base(o);
        po[o] = plan.contiguous ? reduce_one<kind, T>(count, [base](int64_t j) { return base[j]; })
                                : reduce_one<kind, T>(count, [base, offsets](int64_t j) { return base[offsets[j]]; });
      }
    };
    if (input.numel() >= kParallelGrain && plan.out_count > 1) {
      ctx.parallel_for(plan.out_count, count, body);
    } else {
      body(0, plan.out_count);
    }
    ctx.outputs[0] = std::move(out);
    return Status::ok();
  })));
  if (input.dtype() != x->dtype()) ctx.outputs[0] = ctx.outputs[0].cast(x->dtype());
  return Status::ok();
}

template <bool is_max>
Status arg_kernel(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  const Tensor input = (x->dtype() == DType::Float16 || x->dtype() == DType::BFloat16) ? x->cast(DType::Float32) : *x;
  const int64_t raw_axis = ctx.node.attr_int("axis", 0);
  auto normalized = normalize_axis(raw_axis, input.rank());
  if (!normalized) return ctx.error("axis " + std::to_string(raw_axis) + " is out of range for rank " + std::to_string(input.rank()));
  const int64_t axis = *normalized;
  const bool keepdims = ctx.node.attr_int("keepdims", 1) != 0;
  const bool last = ctx.node.attr_int("select_last_index", 0) != 0;
  const Shape& shape = input.shape();
  const int64_t n = shape[static_cast<std::size_t>(axis)];
  if (n == 0) return ctx.error("cannot take the arg of an empty axis " + std::to_string(raw_axis));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<std::size_t>(d)];
  for (int64_t d = axis + 1; d < input.rank(); ++d) inner *= shape[static_cast<std::size_t>(d)];
  Shape out_shape;
  for (int64_t d = 0; d < input.rank(); ++d) {
    if (d != axis) out_shape.push_back(shape[static_cast<std::size_t>(d)]);
    else if (keepdims) out_shape.push_back(1);
  }
  Tensor out(DType::Int64, out_shape);
  int64_t* po = out.data<int64_t>();
  QFLOW_RETURN_IF_ERROR(name_node(ctx, dispatch_numeric(input.dtype(), [&]<typename T>() -> Status {
    const T* in = input.data<T>();
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* p = in + (o / inner) * n * inner + (o % inner);
        T best = p[0];
        int64_t best_index = 0;
        for (int64_t k = 1; k < n; ++k) {
          const T v = p[k * inner];
          const bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
          if (better) {
            best = v;
            best_index = k;
          }
        }
        po[o] = best_index;
      }
    };
    if (input.numel() >= kParallelGrain && outer * inner > 1) {
      ctx.parallel_for(outer * inner, n, body);
    } else {
      body(0, outer * inner);
    }
    return Status::ok();
  })));
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  const std::string d;
  const int64_t L = kLatestOpset;
  r.add_function(d, "ReduceSum", 1, L, reduce_kernel<Reduce::Sum>);
  r.add_function(d, "ReduceMean", 1, L, reduce_kernel<Reduce::Mean>);
  r.add_function(d, "ReduceMax", 1, L, reduce_kernel<Reduce::Max>);
  r.add_function(d, "ReduceMin", 1, L, reduce_kernel<Reduce::Min>);
  r.add_function(d, "ReduceProd", 1, L, reduce_kernel<Reduce::Prod>);
  r.add_function(d, "ReduceL1", 1, L, reduce_kernel<Reduce::L1>);
  r.add_function(d, "ReduceL2", 1, L, reduce_kernel<Reduce::L2>);
  r.add_function(d, "ReduceSumSquare", 1, L, reduce_kernel<Reduce::SumSquare>);
  r.add_function(d, "ReduceLogSum", 1, L, reduce_kernel<Reduce::LogSum>);
  r.add_function(d, "ReduceLogSumExp", 1, L, reduce_kernel<Reduce::LogSumExp>);
  r.add_function(d, "ArgMax", 1, L, arg_kernel<true>);
  r.add_function(d, "ArgMin", 1, L, arg_kernel<false>);
}

}  // namespace qflow
