// Helpers shared by the data-movement and shape kernels: allocation, index reading, remap, transpose.
#include "framework/interpreter/kernels/shape_kernel_util.h"

#include <algorithm>

#include "framework/interpreter/kernel_util.h"

namespace qflow::shape_detail {

Expected<Tensor> make_output(const KernelContext& context, DType dtype, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) return context.error("output shape " + shape_to_string(shape) + " has a negative dimension");
  auto tensor = Tensor::make(dtype, shape);
  if (!tensor) return context.error(tensor.status().message());
  return tensor;
}

Expected<std::vector<int64_t>> read_ints(const KernelContext& context, const Tensor& tensor, const char* what) {
  if (!is_integer(tensor.dtype()))
    return context.error(std::string(what) + " must be an integer tensor, got " + std::string(dtype_name(tensor.dtype())));
  if (tensor.rank() > 1)
    return context.error(std::string(what) + " must be a scalar or 1-D tensor, got shape " +
                         shape_to_string(tensor.shape()));
  return tensor.to_int64s();
}

Expected<std::vector<int64_t>> normalize_axes(const KernelContext& context, const std::vector<int64_t>& axes,
                                              int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    auto axis = normalize_axis(a, rank);
    if (!axis) return context.error(axis.status().message());
    if (std::find(out.begin(), out.end(), *axis) != out.end())
      return context.error("axis " + std::to_string(a) + " is given twice");
    out.push_back(*axis);
  }
  return out;
}

Status remap_axes(const KernelContext& context, const Tensor& in, Tensor& out,
                  const std::vector<std::vector<int64_t>>& maps, const std::byte* fill) {
  const Shape& out_shape = out.shape();
  const int64_t n = out.numel();
  if (n == 0) return Status::ok();
  const std::size_t rank = out_shape.size();
  const std::byte* src = in.raw_data();
  std::byte* dst = out.raw_data();
  return with_element_size(dtype_size(in.dtype()), [&]<std::size_t S>() -> Status {
    if (rank == 0) {
      copy_element<S>(dst, 0, src, 0);
      return Status::ok();
    }
    const std::vector<int64_t> strides = contiguous_strides(in.shape());
    const int64_t inner = out_shape[rank - 1];
    const std::vector<int64_t>& inner_map = maps[rank - 1];
    const int64_t rows = n / inner;
    context.parallel_for(rows, inner, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(rank, 0);
      int64_t rest = begin;
      for (std::size_t d = rank - 1; d-- > 0;) {
        index[d] = rest % out_shape[d];
        rest /= out_shape[d];
      }
      for (int64_t row = begin; row < end; ++row) {
        int64_t base = 0;
        bool filled = false;
        for (std::size_t d = 0; d + 1 < rank; ++d) {
          const int64_t c = maps[d][static_cast<std::size_t>(index[d])];
          if (c < 0) {
            filled = true;
            break;
          }
          base += c * strides[d];
        }
        std::byte* out_row = dst + row * inner * static_cast<int64_t>(S);
        for (int64_t o = 0; o < inner; ++o) {
          const int64_t c = filled ? -1 : inner_map[static_cast<std::size_t>(o)];
          if (c < 0)
            std::memcpy(out_row + o * static_cast<int64_t>(S), fill, S);
          else
            copy_element<S>(out_row, o, src, base + c);
        }
        for (std::size_t d = rank - 1; d-- > 0;) {
          if (++index[d] < out_shape[d]) break;
          index[d] = 0;
        }
      }
    });
    return Status::ok();
  });
}

// When the output's last axis is strided in the input, copying row by row reads one
// element per cache line. Instead, walk square tiles of (unit axis, last axis): the tile's
// input lines are reused across its output rows.
template <std::size_t S>
void transpose_tiled(const KernelContext& context, const std::byte* src, std::byte* dst, const Shape& out_shape,
                     const std::vector<int64_t>& in_strides, std::size_t unit) {
  constexpr int64_t kTile = 16;
  const std::size_t rank = out_shape.size(), last = rank - 1;
  const std::vector<int64_t> out_strides = contiguous_strides(out_shape);
  std::vector<std::size_t> outer_axes;
  for (std::size_t d = 0; d < last; ++d)
    if (d != unit) outer_axes.push_back(d);
  int64_t outer = 1;
  for (std::size_t d : outer_axes) outer *= out_shape[d];
  const int64_t rows = out_shape[unit], cols = out_shape[last];
  const int64_t row_out = out_strides[unit], col_in = in_strides[last];
  context.parallel_for(outer, rows * cols, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t rest = p, in_base = 0, out_base = 0;
      for (std::size_t k = outer_axes.size(); k-- > 0;) {
        const std::size_t d = outer_axes[k];
        const int64_t c = rest % out_shape[d];
        rest /= out_shape[d];
        in_base += c * in_strides[d];
        out_base += c * out_strides[d];
      }
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile);
        for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
          const int64_t c1 = std::min(cols, c0 + kTile);
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t c = c0; c < c1; ++c) copy_element<S>(dst, out_base + r * row_out + c, src, in_base + r + c * col_in);
        }
      }
    }
  });
}

Expected<Tensor> transpose(const KernelContext& context, const Tensor& in, const std::vector<int64_t>& perm) {
  const std::size_t rank = perm.size();
  Shape out_shape(rank);
  const std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> strides(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    out_shape[i] = in.shape()[static_cast<std::size_t>(perm[i])];
    strides[i] = in_strides[static_cast<std::size_t>(perm[i])];
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, in.dtype(), out_shape));
  const int64_t n = out.numel();
  if (n == 0) return out;
  if (rank == 0) {
    std::memcpy(out.raw_data(), in.raw_data(), in.nbytes());
    return out;
  }
  const std::byte* src = in.raw_data();
  std::byte* dst = out.raw_data();
  // Output axis read contiguously from the input (it maps to the input's last axis).
  const std::size_t unit = static_cast<std::size_t>(std::find(perm.begin(), perm.end(), static_cast<int64_t>(rank) - 1) -
                                                    perm.begin());
  if (unit + 1 < rank && out_shape[unit] > 1) {
    QFLOW_RETURN_IF_ERROR(with_element_size(dtype_size(in.dtype()), [&]<std::size_t S>() -> Status {
      transpose_tiled<S>(context, src, dst, out_shape, strides, unit);
      return Status::ok();
    }));
    return out;
  }
  QFLOW_RETURN_IF_ERROR(with_element_size(dtype_size(in.dtype()), [&]<std::size_t S>() -> Status {
    const int64_t inner = out_shape[rank - 1];
    const int64_t inner_stride = strides[rank - 1];
    const int64_t rows = n / inner;
    context.parallel_for(rows, inner, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(rank, 0);
      int64_t rest = begin, base = 0;
      for (std::size_t d = rank - 1; d-- > 0;) {
        index[d] = rest % out_shape[d];
        rest /= out_shape[d];
        base += index[d] * strides[d];
      }
      for (int64_t row = begin; row < end; ++row) {
        std::byte* out_row = dst + row * inner * static_cast<int64_t>(S);
        if (inner_stride == 1) {
          std::memcpy(out_row, src + base * static_cast<int64_t>(S), static_cast<std::size_t>(inner) * S);
        } else {
          for (int64_t o = 0; o < inner; ++o) copy_element<S>(out_row, o, src, base + o * inner_stride);
        }
        for (std::size_t d = rank - 1; d-- > 0;) {
          base += strides[d];
          if (++index[d] < out_shape[d]) break;
          base -= strides[d] * out_shape[d];
          index[d] = 0;
        }
      }
    });
    return Status::ok();
  }));
  return out;
}

}  // namespace qflow::shape_detail
