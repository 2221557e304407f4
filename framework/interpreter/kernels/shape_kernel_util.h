// Private helpers shared by the data-movement and shape kernel files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "framework/interpreter/kernel.h"
#include "framework/interpreter/kernel_registry.h"

namespace qflow {

// Families registered by register_shape_kernels, one per file.
void register_movement_kernels(KernelRegistry& registry);
void register_gather_kernels(KernelRegistry& registry);

namespace shape_detail {

// Data movement only cares about element width, so one instantiation per width serves
// every dtype (bool, halves and numeric types alike).
template <typename Body>
Status with_element_size(std::size_t size, Body&& body) {
  switch (size) {
    case 1: return body.template operator()<1>();
    case 2: return body.template operator()<2>();
    case 4: return body.template operator()<4>();
    case 8: return body.template operator()<8>();
    default: return unsupported("element size " + std::to_string(size) + " is not supported");
  }
}

// Fixed-size memcpy compiles to a single move and stays clear of aliasing rules.
template <std::size_t S>
inline void copy_element(std::byte* dst, int64_t dst_index, const std::byte* src, int64_t src_index) {
  std::memcpy(dst + dst_index * static_cast<int64_t>(S), src + src_index * static_cast<int64_t>(S), S);
}

// Allocates an output, refusing invalid or oversized shapes with the node named.
Expected<Tensor> make_output(const KernelContext& context, DType dtype, const Shape& shape);

// Integer values of an optional 1-D/scalar input (shapes, axes, pads...); error when the
// input is not an integer tensor.
Expected<std::vector<int64_t>> read_ints(const KernelContext& context, const Tensor& tensor, const char* what);

// Normalizes each axis against `rank` and refuses duplicates.
Expected<std::vector<int64_t>> normalize_axes(const KernelContext& context, const std::vector<int64_t>& axes,
                                              int64_t rank);

// Fills `out` (allocated by the caller with make_output, which validates its size before
// any per-axis map is built) where maps[d][o] is the input coordinate along axis d for
// output coordinate o, or -1 to write `fill` (one element of the input's dtype; may be null
// when no map holds -1). Serves Slice, Pad, Tile and Expand.
Status remap_axes(const KernelContext& context, const Tensor& in, Tensor& out,
                  const std::vector<std::vector<int64_t>>& maps, const std::byte* fill);

// Permutes the axes of `in`: output axis i is input axis perm[i].
Expected<Tensor> transpose(const KernelContext& context, const Tensor& in, const std::vector<int64_t>& perm);

}  // namespace shape_detail
}  // namespace qflow
