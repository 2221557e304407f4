// Conv geometry: N-d output sizes, padding and auto_pad for Conv, ConvTranspose and pooling, with im2col/col2im.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// The attributes shared by Conv, ConvTranspose, ConvInteger, QLinearConv and the pools, as
// written on the node (empty lists mean "not given").
struct ConvAttributes {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;            // [begin_0, ..., begin_n-1, end_0, ..., end_n-1]
  std::vector<int64_t> output_padding;  // ConvTranspose only
  std::vector<int64_t> output_shape;    // ConvTranspose only; spatial dims, or N, C and spatial
  std::string auto_pad = "NOTSET";
  int64_t group = 1;
  bool ceil_mode = false;               // pools only
};

inline ConvAttributes read_conv_attributes(const Node& node) {
  ConvAttributes a;
  a.kernel_shape = node.attr_ints("kernel_shape");
  a.strides = node.attr_ints("strides");
  a.dilations = node.attr_ints("dilations");
  a.pads = node.attr_ints("pads");
  a.output_padding = node.attr_ints("output_padding");
  a.output_shape = node.attr_ints("output_shape");
  a.auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (a.auto_pad.empty()) a.auto_pad = "NOTSET";
  a.group = node.attr_int("group", 1);
  a.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  return a;
}

// A convolution seen as image -> columns. The image side is the tensor that is padded and
// windowed (Conv / pool input); the column side has one position per window (Conv / pool
// output). For ConvTranspose the geometry describes the forward Conv it is the transpose of:
// the image side is the ConvTranspose output and the column side its input.
struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;   // image-side channels
  int64_t out_channels = 0;  // column-side channels
  int64_t group = 1;
  Shape in_spatial;          // image-side spatial dims
  Shape out_spatial;         // column-side spatial dims
  Shape kernel;
  Shape strides;
  Shape dilations;
  Shape pads_begin;
  Shape pads_end;

  int64_t rank() const { return static_cast<int64_t>(kernel.size()); }
  int64_t in_size() const { return product(in_spatial); }
  int64_t out_size() const { return product(out_spatial); }
  int64_t kernel_size() const { return product(kernel); }
  int64_t in_channels_per_group() const { return in_channels / group; }
  int64_t out_channels_per_group() const { return out_channels / group; }
  Shape image_shape() const { return with_channels(in_channels, in_spatial); }
  Shape column_shape() const { return with_channels(out_channels, out_spatial); }
  // A 1x1 window with unit stride and no padding: the image already is the column matrix.
  bool is_pointwise() const {
    for (std::size_t d = 0; d < kernel.size(); ++d)
      if (kernel[d] != 1 || strides[d] != 1 || pads_begin[d] != 0 || pads_end[d] != 0) return false;
    return true;
  }

 private:
  static int64_t product(const Shape& s) {
    int64_t p = 1;
    for (int64_t v : s) p *= v;
    return p;
  }
  Shape with_channels(int64_t channels, const Shape& spatial) const {
    Shape s{batch, channels};
    s.insert(s.end(), spatial.begin(), spatial.end());
    return s;
  }
};

namespace conv_detail {

inline std::string join(const std::vector<int64_t>& v) { return shape_to_string(v); }

inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Checks the per-axis attribute lists against the spatial rank and fills defaults.
inline Status fill_window(const ConvAttributes& a, std::size_t rank, ConvGeometry& g) {
  if (rank == 0) return invalid_input("input has no spatial dimensions");
  if (g.kernel.size() != rank)
    return invalid_input("kernel_shape " + join(g.kernel) + " does not match " + std::to_string(rank) +
                         " spatial dimensions");
  g.strides = a.strides.empty() ? Shape(rank, 1) : a.strides;
  g.dilations = a.dilations.empty() ? Shape(rank, 1) : a.dilations;
  if (g.strides.size() != rank) return invalid_input("strides " + join(g.strides) + " do not match the spatial rank");
  if (g.dilations.size() != rank)
    return invalid_input("dilations " + join(g.dilations) + " do not match the spatial rank");
  if (!a.pads.empty() && a.pads.size() != 2 * rank)
    return invalid_input("pads " + join(a.pads) + " should hold " + std::to_string(2 * rank) + " values");
  for (std::size_t d = 0; d < rank; ++d) {
    if (g.kernel[d] <= 0) return invalid_input("kernel_shape " + join(g.kernel) + " must be positive");
    if (g.strides[d] <= 0) return invalid_input("strides " + join(g.strides) + " must be positive");
    if (g.dilations[d] <= 0) return invalid_input("dilations " + join(g.dilations) + " must be positive");
    if (!a.pads.empty() && (a.pads[d] < 0 || a.pads[d + rank] < 0))
      return invalid_input("pads " + join(a.pads) + " must not be negative");
  }
  if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER")
    return invalid_input("auto_pad '" + a.auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return Status::ok();
}

// Forward window arithmetic: pads and column-side sizes from image-side sizes.
inline Status fill_forward(const ConvAttributes& a, ConvGeometry& g) {
  const std::size_t rank = g.kernel.size();
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  g.out_spatial.assign(rank, 0);
  for (std::size_t d = 0; d < rank; ++d) {
    const int64_t in = g.in_spatial[d], s = g.strides[d];
    const int64_t window = (g.kernel[d] - 1) * g.dilations[d] + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      const int64_t out = ceil_div(in, s);
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + window - in);
      const int64_t small = total / 2, large = total - small;
      g.pads_begin[d] = a.auto_pad == "SAME_UPPER" ? small : large;
      g.pads_end[d] = total - g.pads_begin[d];
      g.out_spatial[d] = out;
      continue;
    }
    if (a.auto_pad == "NOTSET" && !a.pads.empty()) {
      g.pads_begin[d] = a.pads[d];
      g.pads_end[d] = a.pads[d + rank];
    }
    const int64_t span = in + g.pads_begin[d] + g.pads_end[d] - window;
    if (span < 0)
      return invalid_input("window " + std::to_string(window) + " is larger than the padded input " +
                           std::to_string(in + g.pads_begin[d] + g.pads_end[d]) + " on spatial axis " +
                           std::to_string(d));
    int64_t out = (a.ceil_mode ? ceil_div(span, s) : span / s) + 1;
    // A last window that would start inside the end padding is dropped (as PyTorch and the
    // ONNX reference do), so every window sees at least one real element.
    if (a.ceil_mode && (out - 1) * s >= in + g.pads_begin[d]) --out;
    g.out_spatial[d] = out;
  }
  return Status::ok();
}

}  // namespace conv_detail

// Conv / ConvInteger / QLinearConv: input [N, C, D1..Dn], weight [M, C/group, k1..kn].
inline Expected<ConvGeometry> make_conv_geometry(const ConvAttributes& a, const Shape& input, const Shape& weight) {
  if (input.size() < 3) return invalid_input("input shape " + shape_to_string(input) + " needs rank 3 or more");
  if (weight.size() != input.size())
    return invalid_input("weight shape " + shape_to_string(weight) + " does not match input rank " +
                         std::to_string(input.size()));
  ConvGeometry g;
  g.batch = input[0];
  g.in_channels = input[1];
  g.out_channels = weight[0];
  g.group = a.group;
  g.in_spatial.assign(input.begin() + 2, input.end());
  g.kernel = a.kernel_shape.empty() ? Shape(weight.begin() + 2, weight.end()) : a.kernel_shape;
  if (g.group <= 0) return invalid_input("group " + std::to_string(g.group) + " must be positive");
  if (g.in_channels % g.group != 0 || g.out_channels % g.group != 0)
    return invalid_input("channels (input " + std::to_string(g.in_channels) + ", output " +
                         std::to_string(g.out_channels) + ") are not divisible by group " + std::to_string(g.group));
  if (weight[1] != g.in_channels / g.group)
    return invalid_input("weight shape " + shape_to_string(weight) + " expects " + std::to_string(weight[1] * g.group) +
                         " input channels, input shape is " + shape_to_string(input));
  if (Shape(weight.begin() + 2, weight.end()) != g.kernel)
    return invalid_input("kernel_shape " + shape_to_string(g.kernel) + " does not match weight shape " +
                         shape_to_string(weight));
  QFLOW_RETURN_IF_ERROR(conv_detail::fill_window(a, g.in_spatial.size(), g));
  QFLOW_RETURN_IF_ERROR(conv_detail::fill_forward(a, g));
  return g;
}

// Pools: input [N, C, D1..Dn]; kernel_shape is required; channels pass through.
inline Expected<ConvGeometry> make_pool_geometry(const ConvAttributes& a, const Shape& input) {
  if (input.size() < 3) return invalid_input("input shape " + shape_to_string(input) + " needs rank 3 or more");
  ConvGeometry g;
  g.batch = input[0];
  g.in_channels = g.out_channels = input[1];
  g.group = 1;
  g.in_spatial.assign(input.begin() + 2, input.end());
  g.kernel = a.kernel_shape;
  QFLOW_RETURN_IF_ERROR(conv_detail::fill_window(a, g.in_spatial.size(), g));
  QFLOW_RETURN_IF_ERROR(conv_detail::fill_forward(a, g));
  return g;
}

// ConvTranspose: input [N, C, D1..Dn], weight [C, M/group, k1..kn], output [N, M, ...].
// The result is the forward geometry (see ConvGeometry): image side = ConvTranspose output.
inline Expected<ConvGeometry> make_conv_transpose_geometry(const ConvAttributes& a, const Shape& input,
                                                           const Shape& weight) {
  if (input.size() < 3) return invalid_input("input shape " + shape_to_string(input) + " needs rank 3 or more");
  if (weight.size() != input.size())
    return invalid_input("weight shape " + shape_to_string(weight) + " does not match input rank " +
                         std::to_string(input.size()));
  const std::size_t rank = input.size() - 2;
  ConvGeometry g;
  g.batch = input[0];
  g.out_channels = input[1];
  g.group = a.group;
  if (g.group <= 0) return invalid_input("group " + std::to_string(g.group) + " must be positive");
  if (weight[0] != input[1] || input[1] % g.group != 0)
    return invalid_input("weight shape " + shape_to_string(weight) + " does not match input shape " +
                         shape_to_string(input) + " with group " + std::to_string(g.group));
  g.in_channels = weight[1] * g.group;
  g.out_spatial.assign(input.begin() + 2, input.end());
  g.kernel = a.kernel_shape.empty() ? Shape(weight.begin() + 2, weight.end()) : a.kernel_shape;
  if (Shape(weight.begin() + 2, weight.end()) != g.kernel)
    return invalid_input("kernel_shape " + shape_to_string(g.kernel) + " does not match weight shape " +
                         shape_to_string(weight));
  QFLOW_RETURN_IF_ERROR(conv_detail::fill_window(a, rank, g));
  const Shape output_padding = a.output_padding.empty() ? Shape(rank, 0) : a.output_padding;
  if (output_padding.size() != rank)
    return invalid_input("output_padding " + shape_to_string(output_padding) + " does not match the spatial rank");
  Shape target;
  if (a.output_shape.size() == rank) target = a.output_shape;
  else if (a.output_shape.size() == rank + 2) target.assign(a.output_shape.begin() + 2, a.output_shape.end());
  else if (!a.output_shape.empty())
    return invalid_input("output_shape " + shape_to_string(a.output_shape) + " does not match the spatial rank");
  const bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
  if (target.empty() && same)
    for (std::size_t d = 0; d < rank; ++d) target.push_back(g.out_spatial[d] * g.strides[d]);
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  g.in_spatial.assign(rank, 0);
  for (std::size_t d = 0; d < rank; ++d) {
    const int64_t window = (g.kernel[d] - 1) * g.dilations[d] + 1;
    const int64_t full = g.strides[d] * (g.out_spatial[d] - 1) + output_padding[d] + window;
    if (!target.empty()) {
      const int64_t total = full - target[d];
      const int64_t small = total / 2, large = total - small;
      g.pads_begin[d] = total < 0 ? 0 : (a.auto_pad == "SAME_UPPER" ? small : large);
      // A negative end pad (output_shape beyond the natural size) leaves trailing zeros.
      g.pads_end[d] = total - g.pads_begin[d];
      g.in_spatial[d] = target[d];
    } else {
      if (!a.pads.empty()) {
        g.pads_begin[d] = a.pads[d];
        g.pads_end[d] = a.pads[d + rank];
      }
      g.in_spatial[d] = full - g.pads_begin[d] - g.pads_end[d];
    }
    if (g.in_spatial[d] <= 0)
      return invalid_input("output spatial size " + std::to_string(g.in_spatial[d]) + " on axis " + std::to_string(d) +
                           " is not positive");
  }
  return g;
}

// The row-major column matrix [rows x n] im2col writes by default. A destination hands out
// row r as an object that fills `count` columns from j with a value, or copies them from
// src[0], src[stride], ...; other layouts (sgemm's packed strips) split rows into pieces.
template <typename T>
struct RowMajorColumns {
  struct Row {
    T* data;
    void fill(int64_t j, int64_t count, T value) const { std::fill(data + j, data + j + count, value); }
    void copy(int64_t j, int64_t count, const T* src, int64_t stride) const {
      T* out = data + j;
      if (stride == 1) std::copy(src, src + count, out);
      else
        for (int64_t t = 0; t < count; ++t) out[t] = src[t * stride];
    }
  };
  T* data;
  int64_t n;
  Row row(int64_t r) const { return {data + r * n}; }
};

// Unfolds `channels` image planes ([channels, in_spatial...], contiguous) into the column
// matrix rows [channels * kernel_size, col_end - col_begin], for the column-side positions
// [col_begin, col_end) in row-major order, written through `columns` (RowMajorColumns or
// another layout with the same interface). Positions falling into padding read `pad_value`
// (zero for float, the zero point for quantized convs).
template <typename T, typename Columns>
void im2col_into(const T* image, const ConvGeometry& g, int64_t channels, T pad_value, int64_t col_begin,
                 int64_t col_end, const Columns& columns) {
  const std::size_t rank = g.kernel.size();
  const int64_t n = col_end - col_begin, kernel_size = g.kernel_size(), in_size = g.in_size();
  const std::size_t last = rank - 1;
  // The window offsets of every kernel tap and the first position, computed once: the
  // divisions are the cost of a row otherwise.
  std::vector<int64_t> offsets(static_cast<std::size_t>(kernel_size) * rank), start(rank), pos(rank);
  for (int64_t k = 0; k < kernel_size; ++k)
    for (std::size_t d = rank, rem = static_cast<std::size_t>(k); d-- > 0;) {
      const int64_t kidx = static_cast<int64_t>(rem % static_cast<std::size_t>(g.kernel[d]));
      rem /= static_cast<std::size_t>(g.kernel[d]);
      offsets[static_cast<std::size_t>(k) * rank + d] = kidx * g.dilations[d] - g.pads_begin[d];
    }
  for (std::size_t d = rank, rem = static_cast<std::size_t>(col_begin); d-- > 0;) {
    start[d] = static_cast<int64_t>(rem % static_cast<std::size_t>(g.out_spatial[d]));
    rem /= static_cast<std::size_t>(g.out_spatial[d]);
  }
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = image + c * in_size;
    for (int64_t k = 0; k < kernel_size; ++k) {
      const int64_t* offset = offsets.data() + static_cast<std::size_t>(k) * rank;
      std::copy(start.begin(), start.end(), pos.begin());
      const auto row = columns.row(c * kernel_size + k);
      int64_t j = 0;
      while (j < n) {
        const int64_t run = std::min(g.out_spatial[last] - pos[last], n - j);
        bool inside = true;
        int64_t base = 0;
        for (std::size_t d = 0; d < last; ++d) {
          const int64_t i = pos[d] * g.strides[d] + offset[d];
          if (i < 0 || i >= g.in_spatial[d]) inside = false;
          base = base * g.in_spatial[d] + i;
        }
        if (!inside) {
          row.fill(j, run, pad_value);
        } else {
          // Along the last axis, run positions [lo, hi) read inside the line, the rest is padding.
          const T* line = plane + base * g.in_spatial[last];
          const int64_t s = g.strides[last], limit = g.in_spatial[last];
          const int64_t first = pos[last] * s + offset[last];
          int64_t lo, hi;
          if (s == 1) {
            lo = std::clamp<int64_t>(-first, 0, run);
            hi = std::clamp<int64_t>(limit - first, lo, run);
          } else {
            lo = first >= 0 ? 0 : std::min(run, (-first + s - 1) / s);
            hi = first >= limit ? lo : std::max(lo, std::min(run, (limit - 1 - first) / s + 1));
          }
          row.fill(j, lo, pad_value);
          if (hi > lo) row.copy(j + lo, hi - lo, line + first + lo * s, s);
          row.fill(j + hi, run - hi, pad_value);
        }
        j += run;
        pos[last] += run;
        for (std::size_t d = last; d > 0 && pos[d] == g.out_spatial[d]; --d) {
          pos[d] = 0;
          ++pos[d - 1];
        }
      }
    }
  }
}

// im2col into the row-major column matrix `columns` [channels * kernel_size, col_end - col_begin].
template <typename T>
void im2col(const T* image, const ConvGeometry& g, int64_t channels, T pad_value, int64_t col_begin, int64_t col_end,
            T* columns) {
  im2col_into(image, g, channels, pad_value, col_begin, col_end, RowMajorColumns<T>{columns, col_end - col_begin});
}

// The adjoint of im2col over all column positions: adds every column entry back into the
// image plane it was read from ([channels, in_spatial...], which the caller initialises).
// Entries that fall into padding are dropped.
template <typename T>
void col2im(const T* columns, const ConvGeometry& g, int64_t channels, T* image) {
  const std::size_t rank = g.kernel.size();
  const int64_t n = g.out_size(), kernel_size = g.kernel_size(), in_size = g.in_size();
  const std::size_t last = rank - 1;
  std::vector<int64_t> kidx(rank), offset(rank), pos(rank);
  for (int64_t c = 0; c < channels; ++c) {
    T* plane = image + c * in_size;
    for (int64_t k = 0; k < kernel_size; ++k) {
      for (std::size_t d = rank, rem = static_cast<std::size_t>(k); d-- > 0;) {
        kidx[d] = static_cast<int64_t>(rem % static_cast<std::size_t>(g.kernel[d]));
        rem /= static_cast<std::size_t>(g.kernel[d]);
        offset[d] = kidx[d] * g.dilations[d] - g.pads_begin[d];
      }
      std::fill(pos.begin(), pos.end(), 0);
      const T* row = columns + (c * kernel_size + k) * n;
      for (int64_t j = 0; j < n; j += g.out_spatial[last]) {
        bool inside = true;
        int64_t base = 0;
        for (std::size_t d = 0; d < last; ++d) {
          const int64_t i = pos[d] * g.strides[d] + offset[d];
          if (i < 0 || i >= g.in_spatial[d]) inside = false;
          base = base * g.in_spatial[d] + i;
        }
        if (inside) {
          T* line = plane + base * g.in_spatial[last];
          const int64_t s = g.strides[last], limit = g.in_spatial[last];
          int64_t i = offset[last];
          for (int64_t t = 0; t < g.out_spatial[last]; ++t, i += s)
            if (i >= 0 && i < limit) line[i] += row[j + t];
        }
        for (std::size_t d = last; d-- > 0;) {
          if (++pos[d] < g.out_spatial[d]) break;
          pos[d] = 0;
        }
      }
    }
  }
}

}  // namespace qflow
