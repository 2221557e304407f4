// Shared machinery of the element-wise kernel files: broadcast walking, chunked loops, half types.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/interpreter/kernel_isa.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"

namespace qflow {

// Registration entry points of the element-wise family, all called from
// register_elementwise_kernels.
void register_unary_kernels(KernelRegistry& registry);
void register_binary_kernels(KernelRegistry& registry);
void register_logic_kernels(KernelRegistry& registry);

namespace elementwise {

// Below this many elements a loop is not worth handing to the pool.
inline constexpr int64_t kParallelGrain = 1 << 15;

// body(begin, end) inlined into a copy compiled for AVX2 (a body marked always_inline: the
// loops of unary_map and binary_broadcast). Each element is one operator application whose
// IEEE operations the avx2 target (which has no FMA to contract into) computes as the baseline
// does, so both copies give the same bits.
template <typename Body>
__attribute__((target("avx2"))) void run_chunk_avx2(Body& body, int64_t begin, int64_t end) {
  body(begin, end);
}

template <typename Body>
void run_chunk(Body& body, int64_t begin, int64_t end) {
  if (kernel_isa_allows_avx2()) run_chunk_avx2(body, begin, end);
  else body(begin, end);
}

// Runs body(begin, end) over [0, n), split across the pool when n is large, in the AVX2 copy
// where the cap admits it. Every element is written by exactly one chunk, so results do not
// depend on the thread count.
template <typename Body>
void chunked(const KernelContext& context, int64_t n, Body&& body) {
  if (n <= 0) return;
  if (n < kParallelGrain || !context.threads) {
    run_chunk(body, int64_t{0}, n);
    return;
  }
  context.parallel_for(n, [&body](int64_t begin, int64_t end) { run_chunk(body, begin, end); });
}

// The executor's program of Q/DQ pairs after this node (KernelContext::epilogue) when it
// applies to a float32 output of `rank` dims as it is written: a kernel passing it to
// chunked_finished (or the helpers below) sets context.epilogue_applied. Null otherwise;
// the executor then runs the pairs over the whole output afterwards.
inline const Epilogue* flat_epilogue(const KernelContext& context, std::size_t rank) {
  return context.epilogue && context.epilogue->fits(rank, -1) ? context.epilogue : nullptr;
}

// Elements in a block of chunked_finished: 16 KiB of floats, still in L1 when the program
// reads them back. Run over the whole output afterwards, the pairs read and wrote it from
// memory once more: PP-OCRv4 det's Q/DQ model per page, 2 threads, 86 -> 76 ms (2-core Xeon,
// avx2 avx512f avx_vnni avx512_vnni).
inline constexpr int64_t kFinishBlock = 4096;

// chunked, then `program` (may be null) over out[begin, end) of each block right after body
// wrote it. Block boundaries change no element: each goes through the same operations.
template <typename Body>
void chunked_finished(const KernelContext& context, int64_t n, const Epilogue* program, float* out, Body&& body) {
  if (!program) return chunked(context, n, std::forward<Body>(body));
  chunked(context, n, [&body, program, out](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += kFinishBlock) {
      const int64_t e = std::min(end, b + kFinishBlock);
      run_chunk(body, b, e);
      activation::finish_rows(program, out + b, 1, e - b, e - b, -1, nullptr);
    }
  });
}

// K inputs broadcast to one output, with adjacent dimensions merged whenever every input
// either spans both or broadcasts across both; what remains is usually one or two dims, so
// the innermost loop runs long with strides of 0 or 1.
template <std::size_t K>
struct BroadcastPlan {
  Shape dims;                                   // merged output dims, never empty
  std::array<std::vector<int64_t>, K> strides;  // element strides of each input per merged dim
};

template <std::size_t K>
BroadcastPlan<K> make_broadcast_plan(const Shape& out, const std::array<const Shape*, K>& ins) {
  std::array<std::vector<int64_t>, K> full;
  for (std::size_t k = 0; k < K; ++k) full[k] = broadcast_strides(*ins[k], out);
  BroadcastPlan<K> plan;
  std::array<bool, K> prev_bcast{};
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::array<bool, K> bcast{};
    for (std::size_t k = 0; k < K; ++k) bcast[k] = full[k][d] == 0;
    if (!plan.dims.empty() && bcast == prev_bcast) {
      // Row-major: the merged dim's inner stride stays, its extent grows.
      plan.dims.back() *= out[d];
      for (std::size_t k = 0; k < K; ++k) plan.strides[k].back() = full[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (std::size_t k = 0; k < K; ++k) plan.strides[k].push_back(full[k][d]);
    }
    prev_bcast = bcast;
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (std::size_t k = 0; k < K; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

// Visits output elements [begin, end) row by row: inner(count, out_offset, in_offsets,
// inner_strides) handles `count` consecutive outputs of one innermost row.
template <std::size_t K, typename Inner>
void walk_broadcast(const BroadcastPlan<K>& plan, int64_t begin, int64_t end, Inner&& inner) {
  const std::size_t rank = plan.dims.size();
  const int64_t row = plan.dims.back();
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, K> offset{};
  int64_t rest = begin;
  for (std::size_t d = rank; d-- > 0;) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
    for (std::size_t k = 0; k < K; ++k) offset[k] += index[d] * plan.strides[k][d];
  }
  std::array<int64_t, K> inner_stride;
  for (std::size_t k = 0; k < K; ++k) inner_stride[k] = plan.strides[k][rank - 1];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t col = index[rank - 1];
    const int64_t count = std::min(row - col, end - pos);
    inner(count, pos, offset, inner_stride);
    pos += count;
    if (pos >= end) break;
    // The row is complete: rewind to its start, then step the outer dims like an odometer.
    for (std::size_t k = 0; k < K; ++k) offset[k] -= col * inner_stride[k];
    index[rank - 1] = 0;
    for (std::size_t d = rank - 1; d-- > 0;) {
      ++index[d];
      for (std::size_t k = 0; k < K; ++k) offset[k] += plan.strides[k][d];
      if (index[d] < plan.dims[d]) break;
      for (std::size_t k = 0; k < K; ++k) offset[k] -= plan.strides[k][d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

// out[i] = op(a[ia], b[ib]) with numpy broadcasting of a and b to out_shape. Tight loops for
// equal shapes and for inner rows where either side is constant.
// `program`: flat_epilogue's, run on each block of a float output as it is written.
template <typename TA, typename TB, typename TO, typename Op>
void binary_broadcast(const KernelContext& context, const TA* a, const Shape& a_shape, const TB* b,
                      const Shape& b_shape, TO* out, const Shape& out_shape, Op op, const Epilogue* program = nullptr) {
  const int64_t n = shape_numel(out_shape);
  float* finished = nullptr;
  if constexpr (std::is_same_v<TO, float>) finished = out;
  if (!finished) program = nullptr;
  if (a_shape == b_shape) {
    // Pointers and the functor are copied into the chunk so the compiler knows stores to
    // out cannot change them, which lets it vectorise.
    chunked_finished(context, n, program, finished, [a, b, out, op](int64_t begin, int64_t end) __attribute__((always_inline)) {
      for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], b[i]);
    });
    return;
  }
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(out_shape, {&a_shape, &b_shape});
  chunked_finished(context, n, program, finished, [&](int64_t begin, int64_t end) {
    walk_broadcast<2>(plan, begin, end, [&](int64_t count, int64_t o, const std::array<int64_t, 2>& off,
                                            const std::array<int64_t, 2>& step) {
      const TA* pa = a + off[0];
      const TB* pb = b + off[1];
      TO* po = out + o;
      if (step[0] == 1 && step[1] == 1) {
        for (int64_t i = 0; i < count; ++i) po[i] = op(pa[i], pb[i]);
      } else if (step[0] == 1 && step[1] == 0) {
        const TB vb = *pb;
        for (int64_t i = 0; i < count; ++i) po[i] = op(pa[i], vb);
      } else if (step[0] == 0 && step[1] == 1) {
        const TA va = *pa;
        for (int64_t i = 0; i < count; ++i) po[i] = op(va, pb[i]);
      } else {
        for (int64_t i = 0; i < count; ++i) po[i] = op(pa[i * step[0]], pb[i * step[1]]);
      }
    });
  });
}

// out[i] = op(in[i]) over all elements.
// `program` as binary_broadcast's.
template <typename TI, typename TO, typename Op>
void unary_map(const KernelContext& context, const TI* in, TO* out, int64_t n, Op op, const Epilogue* program = nullptr) {
  float* finished = nullptr;
  if constexpr (std::is_same_v<TO, float>) finished = out;
  if (!finished) program = nullptr;
  chunked_finished(context, n, program, finished, [in, out, op](int64_t begin, int64_t end) __attribute__((always_inline)) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(in[i]);
  });
}

// Shape B takes part in broadcasting with. Before opset 7, Add/Sub/Mul/Div/Pow and the
// logical ops broadcast only when the `broadcast` attribute is 1, aligning B to A at `axis`
// (or at the trailing dimensions when no axis is given).
Expected<Shape> legacy_broadcast_shape(const KernelContext& context, const Shape& a, const Shape& b);

// Prefixes the node to errors that do not name it yet (an unsupported element type).
Status name_node(const KernelContext& context, Status status);

// Runs `body` with Float16/BFloat16 inputs widened to Float32, then narrows float outputs
// back: the reference kernels compute half types in single precision.
Status with_halves_as_float(KernelContext& context, const KernelFunction& body);

}  // namespace elementwise
}  // namespace qflow
