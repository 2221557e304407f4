// Integer convolution and matmul kernels: ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/conv_geometry.h"
#include "framework/interpreter/kernels/conv_quads.h"
#include "framework/interpreter/kernels/eigen_maps.h"
#include "framework/interpreter/kernels/quant_util.h"
#include "qflow/runtime/integer_gemm.h"

namespace qflow {

namespace {

using quant_detail::dispatch_quantized;
using quant_detail::read_scales;
using quant_detail::read_zero_points;
using quant_detail::require_per_tensor;
using quant_detail::saturate_round;

// Zero points are subtracted before the product, so the GEMM sees exact small integers and
// the int32 accumulation is the one ONNX specifies.
void gemm_s32(const int32_t* a, int64_t lda, const int32_t* b, int64_t ldb, int32_t* c, int64_t ldc, int64_t m,
              int64_t k, int64_t n) {
  if (m <= 0 || n <= 0) return;
  auto out = matrix_view(c, m, n, ldc);
  if (k <= 0) {
    out.setZero();
    return;
  }
  out.noalias() = matrix_view(a, m, k, lda) * matrix_view(b, k, n, ldb);
}

// C[m, n] = A[m, k] B[k, n] split across the pool along the larger output dimension.
void gemm_s32_parallel(const KernelContext& context, const int32_t* a, int64_t lda, const int32_t* b, int64_t ldb,
                       int32_t* c, int64_t ldc, int64_t m, int64_t k, int64_t n) {
  if (m >= n) {
    context.parallel_for(m, 2 * k * n, [&](int64_t begin, int64_t end) {
      gemm_s32(a + begin * lda, lda, b, ldb, c + begin * ldc, ldc, end - begin, k, n);
    });
  } else {
    context.parallel_for(
        n, 2 * k * m,
        [&](int64_t begin, int64_t end) { gemm_s32(a, lda, b + begin, ldb, c + begin, ldc, m, k, end - begin); });
  }
}

constexpr int64_t round_up(int64_t n, int64_t step) { return (n + step - 1) / step * step; }

// out[r * ld + c] = sum_k w[r][k] * column_c[k] for r < real_rows and c < n, through
// fx::fast::gemm_s16 in blocks of 256 columns on the pool. `w` holds `rows` (real_rows
// rounded up to kRowBlock) int16 rows of `depth` (the reduction k rounded up to kDepthStep)
// values, zero padded; `gather(c0, count, columns)` writes columns [c0, c0 + count)
// pixel-major, `depth` values apart, their first k values (the rest stay zero). Exact for
// int16 operands whose sums of k products fit int32.
template <typename Gather>
void gemm_s16_columns(const KernelContext& context, const int16_t* w, int64_t real_rows, int64_t rows, int64_t depth,
                      int64_t k, int64_t n, int32_t* out, int64_t ld, const Gather& gather) {
  namespace fast = fx::fast;
  const fast::Isa isa = fast::best_isa();
  const std::vector<int32_t> zeros(static_cast<std::size_t>(rows), 0);
  constexpr int64_t kBlock = 256;  // columns per GEMM: about 2 * depth KiB
  context.parallel_for(round_up(n, kBlock) / kBlock, 2 * kBlock * k * real_rows, [&](int64_t b0, int64_t b1) {
    std::vector<int16_t> columns(static_cast<std::size_t>(kBlock * depth), 0);
    std::vector<int32_t> acc(static_cast<std::size_t>(rows * kBlock));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kBlock, count = std::min(kBlock, n - c0), cols = round_up(count, fast::kColBlock);
      gather(c0, count, columns.data());
      std::fill(columns.begin() + count * depth, columns.begin() + cols * depth, int16_t{0});
      fast::gemm_s16(isa, w, rows, columns.data(), cols, depth, zeros.data(), acc.data(), kBlock);
      for (int64_t r = 0; r < real_rows; ++r) std::copy_n(acc.data() + r * kBlock, count, out + r * ld + c0);
    }
  });
}

Status with_node(const KernelContext& context, const Status& status) {
  return status.with_context(context.node.op_type() + " '" + context.node.name() + "'");
}

bool is_per_tensor(const Tensor* t) {
  return !t || (t->numel() == 1 && t->rank() <= 1);
}

// ---------------------------------------------------------------------------------------------
// MatMul family

enum class MatmulSide { A, B };

// Shape a per-row (A) or per-column (B) parameter broadcasts with, against the operand shape
// (already at least 2-D): a 1-D tensor of M values is a column [M, 1] for A, a 1-D tensor of
// N values is a row for B; N-D tensors must have 1 on the reduced axis.
Expected<Shape> matmul_param_shape(const KernelContext& context, const Tensor& param, const Shape& operand,
                                   MatmulSide side, const char* what) {
  if (is_per_tensor(&param)) return Shape{};
  const std::size_t r = operand.size();
  const int64_t rows = operand[r - 2], cols = operand[r - 1];
  Shape shape = param.shape();
  if (shape.size() == 1) {
    const int64_t expected = side == MatmulSide::A ? rows : cols;
    if (shape[0] != expected)
      return context.error(std::string(what) + " has " + std::to_string(shape[0]) + " values, expected 1 or " +
                           std::to_string(expected) + (side == MatmulSide::A ? " (rows of a)" : " (columns of b)"));
    if (side == MatmulSide::A) shape = {rows, 1};
  } else {
    const bool reduced_ok = side == MatmulSide::A ? shape.back() == 1 : shape[shape.size() - 2] == 1;
    if (!reduced_ok || shape.size() > r)
      return context.error(std::string(what) + " shape " + shape_to_string(shape) + " is neither per-tensor nor per-" +
                           (side == MatmulSide::A ? "row" : "column") + " for operand shape " +
                           shape_to_string(operand));
  }
  auto merged = broadcast_shapes(operand, shape);
  if (!merged || *merged != operand)
    return context.error(std::string(what) + " shape " + shape_to_string(param.shape()) +
                         " does not broadcast to operand shape " + shape_to_string(operand));
  return shape;
}

// The operand as int32 with its (broadcast) zero point subtracted.
Expected<Tensor> subtract_matmul_zero_point(const KernelContext& context, const Tensor& data, const Tensor* zero_point,
                                            MatmulSide side, const char* what) {
  if (zero_point && zero_point->dtype() != data.dtype())
    return context.error(std::string(what) + " type " + std::string(dtype_name(zero_point->dtype())) +
                         " differs from its operand type " + std::string(dtype_name(data.dtype())));
  Shape zp_shape;
  if (zero_point) {
    QFLOW_ASSIGN_OR_RETURN(zp_shape, matmul_param_shape(context, *zero_point, data.shape(), side, what));
  }
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> zp, read_zero_points(context, zero_point, 1, what));
  Tensor out(DType::Int32, data.shape());
  int32_t* o = out.data<int32_t>();
  const Status converted = dispatch_quantized(data.dtype(), [&]<typename T>() {
    const T* in = data.data<T>();
    for_each_broadcast(data.shape(), data.shape(), zp_shape, [&](int64_t i, int64_t, int64_t iz) {
      o[i] = static_cast<int32_t>(in[i]) - zp[static_cast<std::size_t>(iz)];
    });
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(with_node(context, converted));
  return out;
}

// Matmul operands promoted to at least 2-D, with the output shape numpy gives.
struct MatmulShapes {
  Shape a, b;      // promoted operand shapes
  Shape full_out;  // batch + [M, N]
  Shape out;       // with the promoted unit dimensions dropped again
};

Expected<MatmulShapes> matmul_shapes(const KernelContext& context, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return context.error("matmul operands must have rank 1 or more");
  MatmulShapes s;
  s.a = a.size() == 1 ? Shape{1, a[0]} : a;
  s.b = b.size() == 1 ? Shape{b[0], 1} : b;
  const int64_t m = s.a[s.a.size() - 2], k = s.a.back(), n = s.b.back();
  if (s.b[s.b.size() - 2] != k)
    return context.error("inner dimensions differ: a " + shape_to_string(a) + ", b " + shape_to_string(b));
  auto batch = broadcast_shapes(Shape(s.a.begin(), s.a.end() - 2), Shape(s.b.begin(), s.b.end() - 2));
  if (!batch) return context.error(batch.status().message());
  s.full_out = *batch;
  s.out = *batch;
  s.full_out.push_back(m);
  s.full_out.push_back(n);
  if (a.size() > 1) s.out.push_back(m);
  if (b.size() > 1) s.out.push_back(n);
  return s;
}

// C[m, n] = A[m, k] B[k, n] for centred 8-bit operands (|value| <= 255, k small enough that
// no sum leaves int32) through the fixed-point runtime's int16 GEMM: A's rows are its weight
// rows, B's columns its pixel-major columns, both zero padded to its blocks; exact.
void gemm_s16_exact(const KernelContext& context, const int32_t* a, const int32_t* b, int32_t* c, int64_t m, int64_t k,
                    int64_t n) {
  namespace fast = fx::fast;
  const int64_t depth = round_up(k, fast::kDepthStep), rows = round_up(m, fast::kRowBlock);
  std::vector<int16_t> a16(static_cast<std::size_t>(rows * depth), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < k; ++j) a16[static_cast<std::size_t>(r * depth + j)] = static_cast<int16_t>(a[r * k + j]);
  gemm_s16_columns(context, a16.data(), m, rows, depth, k, n, c, n, [&](int64_t c0, int64_t count, int16_t* columns) {
    for (int64_t col = 0; col < count; ++col)
      for (int64_t j = 0; j < k; ++j) columns[col * depth + j] = static_cast<int16_t>(b[j * n + c0 + col]);
  });
}

// Batched exact product of int32 operands shaped as in `s`; result shaped s.full_out.
// `eight_bit`: the operands are centred 8-bit values, which the int16 GEMM takes.
Expected<Tensor> batched_matmul_s32(const KernelContext& context, const MatmulShapes& s, const Tensor& a,
                                    const Tensor& b, bool eight_bit) {
  const int64_t m = s.full_out[s.full_out.size() - 2], n = s.full_out.back(), k = s.a.back();
  auto made = Tensor::make(DType::Int32, s.full_out);
  if (!made) return context.error("output: " + made.status().message());
  Tensor out = std::move(made).value();
  const Shape batch(s.full_out.begin(), s.full_out.end() - 2);
  const Shape a_batch(s.a.begin(), s.a.end() - 2), b_batch(s.b.begin(), s.b.end() - 2);
  const int32_t* pa = a.data<int32_t>();
  const int32_t* pb = b.data<int32_t>();
  int32_t* pc = out.data<int32_t>();
  const bool int16_gemm = eight_bit && k <= (int64_t{1} << 31) / (255 * 255) - 1;
  for_each_broadcast(batch, a_batch, b_batch, [&](int64_t i, int64_t ia, int64_t ib) {
    if (int16_gemm) gemm_s16_exact(context, pa + ia * m * k, pb + ib * k * n, pc + i * m * n, m, k, n);
    else gemm_s32_parallel(context, pa + ia * m * k, k, pb + ib * k * n, n, pc + i * m * n, n, m, k, n);
  });
  return out;
}

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// B of an 8-bit MatMulInteger packed for the byte-quad GEMM of VNNI CPUs (gemm_quads_u8s8,
// signed weight rows x unsigned pixel columns): B offset into uint8 (B - zb = B' - zb') becomes
// the GEMM's columns, in panels of kQuadPanel columns so that threads take panels apart, with
// B''s column sums for the zero-point correction. A takes the signed rows, so the GEMM's
// output is C's row-major layout. Built once for a constant B.
struct QuadB {
  static constexpr int64_t kQuadPanel = 256;  // columns per panel, a multiple of kQuadPixelBlock
  int64_t k = 0, n = 0, quads = 0, panels = 0;
  int64_t zb = 0;  // zb' = zb + the offset
  std::vector<uint8_t> x;  // [panels][quads][kQuadPanel][4]
  std::vector<int64_t> col_sum;
};

template <typename TB>
QuadB pack_quad_b(const TB* b, int32_t zb, int64_t k, int64_t n) {
  const int32_t off = std::is_signed_v<TB> ? 128 : 0;
  constexpr int64_t kPanel = QuadB::kQuadPanel;
  QuadB p;
  p.k = k;
  p.n = n;
  p.zb = zb + off;
  p.quads = (k + 3) / 4;
  p.panels = round_up(n, kPanel) / kPanel;
  p.x.assign(static_cast<std::size_t>(p.panels * p.quads * kPanel * 4), 0);
  p.col_sum.assign(static_cast<std::size_t>(n), 0);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t nn = 0; nn < n; ++nn) {
      const auto v = static_cast<uint8_t>(static_cast<int32_t>(b[kk * n + nn]) + off);
      p.x[static_cast<std::size_t>(((nn / kPanel * p.quads + kk / 4) * kPanel + nn % kPanel) * 4 + kk % 4)] = v;
      p.col_sum[static_cast<std::size_t>(nn)] += v;
    }
  return p;
}

// C[m, n] = sum_k (A[m, k] - za) (B[k, n] - zb): A offset into int8 as the GEMM's weight rows
// (packed here, with its row sums), B the packed panels; the zero points come back through
// A's row sums and B's column sums. Threads take (row tile, panel) pairs. Sums wrap modulo
// 2^32 on the way; the result fits int32 (the caller checked the reduction), so the corrected
// value is exact.
template <typename TA>
void matmul_quads(const KernelContext& context, const QuadB& p, const TA* a, int32_t za, int32_t* c, int64_t m) {
  namespace fast = fx::fast;
  constexpr int64_t kRows = fast::kQuadRowBlock, kPanel = QuadB::kQuadPanel;
  const fast::Isa isa = fast::best_isa();
  const int32_t off_a = std::is_signed_v<TA> ? 0 : -128;
  const int64_t za1 = za + off_a, k = p.k, n = p.n, quads = p.quads;
  const int64_t rows = round_up(m, kRows);
  // A' = A + off_a in int8: [rows / kRows][quads][kRows][4], zero padded. A quad of A's row
  // is one 32-bit word, and adding -128 to a uint8 flips its top bit: words move whole.
  std::vector<int8_t> w(static_cast<std::size_t>(rows * quads * 4), 0);
  // -(the zero-point terms of each row), modulo 2^32: the GEMM's per-row start value.
  std::vector<int32_t> row_init(static_cast<std::size_t>(rows), 0);
  const auto wrap = [](int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); };
  context.parallel_for(rows / kRows, kRows * k, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk)
      for (int64_t r = blk * kRows; r < std::min(m, (blk + 1) * kRows); ++r) {
        const auto* row = reinterpret_cast<const uint8_t*>(a + r * k);
        uint8_t* to = reinterpret_cast<uint8_t*>(w.data()) + (blk * quads * kRows + r % kRows) * 4;
        constexpr uint32_t flip = std::is_signed_v<TA> ? 0u : 0x80808080u;
        const int64_t whole = k / 4;
        for (int64_t q = 0; q < whole; ++q) {
          uint32_t word;
          std::memcpy(&word, row + 4 * q, 4);
          word ^= flip;
          std::memcpy(to + q * kRows * 4, &word, 4);
        }
        for (int64_t kk = whole * 4; kk < k; ++kk) to[whole * kRows * 4 + kk % 4] = static_cast<uint8_t>(row[kk] ^ (flip & 0xFFu));
        int64_t sum = 0;  // of A' = A + off_a
        for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<TA>(row[kk]);
        sum += off_a * k;
        row_init[static_cast<std::size_t>(r)] = wrap(-(p.zb * sum - k * za1 * p.zb));
      }
  });
  // za1 * B''s column sums, modulo 2^32: subtracted from every row.
  std::vector<int32_t> col_term(static_cast<std::size_t>(p.panels * kPanel), 0);
  for (int64_t col = 0; col < n; ++col) col_term[static_cast<std::size_t>(col)] = wrap(za1 * p.col_sum[static_cast<std::size_t>(col)]);
  constexpr int64_t kTileRows = 64;  // rows of A per task, a multiple of kQuadRowBlock
  const int64_t tiles = round_up(rows, kTileRows) / kTileRows;
  context.parallel_for(tiles * p.panels, 2 * kTileRows * k * kPanel, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> acc;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t tile = task / p.panels, panel = task % p.panels;
      const int64_t r0 = tile * kTileRows, tile_rows = std::min(kTileRows, rows - r0);
      const int64_t n0 = panel * kPanel, count = std::min(kPanel, n - n0);
      // Whole tiles of C are written in place; ragged ones (padding rows or columns) go
      // through a scratch tile.
      const bool direct = count == kPanel && r0 + tile_rows <= m;
      if (!direct) acc.resize(static_cast<std::size_t>(kTileRows * kPanel));
      int32_t* dst = direct ? c + r0 * n + n0 : acc.data();
      const int64_t ld = direct ? n : kPanel;
      fast::gemm_quads_u8s8(isa, w.data() + r0 * quads * 4, tile_rows, p.x.data() + panel * quads * kPanel * 4,
                            kPanel, quads, row_init.data() + r0, dst, ld);
      const int32_t* term = col_term.data() + n0;
      for (int64_t r = r0; r < std::min(m, r0 + tile_rows); ++r) {
        const int32_t* from = dst + (r - r0) * ld;
        int32_t* to = c + r * n + n0;
        for (int64_t col = 0; col < count; ++col)
          to[col] = static_cast<int32_t>(static_cast<uint32_t>(from[col]) - static_cast<uint32_t>(term[col]));
      }
    }
  });
}

// Whether the byte-quad path computes this MatMulInteger: 8-bit operands, per-tensor zero
// points of their operands' types, a VNNI CPU and a reduction whose sums fit int32.
bool quads_apply(DType a, DType b, const Tensor* a_zp, const Tensor* b_zp, int64_t k) {
  return is_8bit(a) && is_8bit(b) && is_per_tensor(a_zp) && is_per_tensor(b_zp) && (!a_zp || a_zp->dtype() == a) &&
         (!b_zp || b_zp->dtype() == b) && fx::fast::quads_supported(fx::fast::best_isa()) &&
         k <= (int64_t{1} << 31) / (255 * 255) - 1;
}

int32_t zero_point_of(const Tensor* zp) { return zp ? static_cast<int32_t>(zp->to_int64s()[0]) : 0; }

QuadB pack_quad_b_any(const Tensor& b, int32_t zb, int64_t k, int64_t n) {
  return b.dtype() == DType::Int8 ? pack_quad_b(b.data<int8_t>(), zb, k, n) : pack_quad_b(b.data<uint8_t>(), zb, k, n);
}

// MatMulInteger through matmul_quads per batch (B packed here unless `packed` was built
// from the constant B); nullopt where that path does not apply.
std::optional<Tensor> matmul_integer_quads(const KernelContext& context, const MatmulShapes& s, const Tensor& a,
                                           const Tensor& b, const Tensor* a_zp, const Tensor* b_zp,
                                           const QuadB* packed) {
  const int64_t m = s.full_out[s.full_out.size() - 2], n = s.full_out.back(), k = s.a.back();
  if (!quads_apply(a.dtype(), b.dtype(), a_zp, b_zp, k)) return std::nullopt;
  auto made = Tensor::make(DType::Int32, s.full_out);
  if (!made) return std::nullopt;
  Tensor out = std::move(made).value();
  const int32_t za = zero_point_of(a_zp), zb = zero_point_of(b_zp);
  const Shape batch(s.full_out.begin(), s.full_out.end() - 2);
  const Shape a_batch(s.a.begin(), s.a.end() - 2), b_batch(s.b.begin(), s.b.end() - 2);
  for_each_broadcast(batch, a_batch, b_batch, [&](int64_t i, int64_t ia, int64_t ib) {
    QuadB local;
    if (!packed) {
      local = b.dtype() == DType::Int8 ? pack_quad_b(b.data<int8_t>() + ib * k * n, zb, k, n)
                                       : pack_quad_b(b.data<uint8_t>() + ib * k * n, zb, k, n);
    }
    const QuadB& p = packed ? *packed : local;
    if (a.dtype() == DType::UInt8)
      matmul_quads(context, p, a.data<uint8_t>() + ia * m * k, za, out.data<int32_t>() + i * m * n, m);
    else
      matmul_quads(context, p, a.data<int8_t>() + ia * m * k, za, out.data<int32_t>() + i * m * n, m);
  });
  return out;
}

// B of an 8-bit MatMulInteger packed for the int16 GEMM where the CPU has no VNNI: B - zb
// transposed into columns of K int16 (K rounded up to kDepthStep, zero padded), the layout
// gemm_s16_columns gathers its columns in, so a run copies them instead of gathering B's
// strided columns from an int32 copy. Built once for a constant B.
struct RowsB {
  int64_t k = 0, n = 0, depth = 0;
  std::vector<int16_t> columns;  // [n][depth]
};

template <typename TB>
RowsB pack_rows_b(const TB* b, int32_t zb, int64_t k, int64_t n) {
  RowsB p;
  p.k = k;
  p.n = n;
  p.depth = round_up(k, fx::fast::kDepthStep);
  p.columns.assign(static_cast<std::size_t>(n * p.depth), 0);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t nn = 0; nn < n; ++nn)
      p.columns[static_cast<std::size_t>(nn * p.depth + kk)] = static_cast<int16_t>(int32_t{b[kk * n + nn]} - zb);
  return p;
}

// C[m, n] = (A - za) (B - zb): A's rows, centred, are the GEMM's weight rows, B's packed
// columns its columns (gemm_s16_columns, as gemm_s16_exact).
template <typename TA>
void matmul_rows(const KernelContext& context, const RowsB& p, const TA* a, int32_t za, int32_t* c, int64_t m) {
  const int64_t rows = round_up(m, fx::fast::kRowBlock);
  std::vector<int16_t> a16(static_cast<std::size_t>(rows * p.depth), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t kk = 0; kk < p.k; ++kk)
      a16[static_cast<std::size_t>(r * p.depth + kk)] = static_cast<int16_t>(int32_t{a[r * p.k + kk]} - za);
  gemm_s16_columns(context, a16.data(), m, rows, p.depth, p.k, p.n, c, p.n, [&](int64_t c0, int64_t count, int16_t* columns) {
    std::copy_n(p.columns.data() + c0 * p.depth, count * p.depth, columns);
  });
}

// MatMulInteger on a constant B packed as RowsB (8-bit A with a per-tensor zero point of its
// type, sums within int32); nullopt where that does not apply.
std::optional<Tensor> matmul_integer_rows(const KernelContext& context, const MatmulShapes& s, const Tensor& a,
                                          const Tensor* a_zp, const RowsB& packed) {
  const int64_t m = s.full_out[s.full_out.size() - 2], n = s.full_out.back(), k = s.a.back();
  if (!is_8bit(a.dtype()) || !is_per_tensor(a_zp) || (a_zp && a_zp->dtype() != a.dtype()) || k != packed.k ||
      n != packed.n || s.b.size() != 2 || k > (int64_t{1} << 31) / (255 * 255) - 1)
    return std::nullopt;
  auto made = Tensor::make(DType::Int32, s.full_out);
  if (!made) return std::nullopt;
  Tensor out = std::move(made).value();
  const int32_t za = zero_point_of(a_zp);
  const int64_t batches = out.numel() / std::max<int64_t>(1, m * n);
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t ia = s.a.size() > 2 ? i : 0;
    if (a.dtype() == DType::UInt8)
      matmul_rows(context, packed, a.data<uint8_t>() + ia * m * k, za, out.data<int32_t>() + i * m * n, m);
    else
      matmul_rows(context, packed, a.data<int8_t>() + ia * m * k, za, out.data<int32_t>() + i * m * n, m);
  }
  return out;
}

Status matmul_integer(KernelContext& context, const QuadB* packed, const RowsB* rows) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* a, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* b, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const MatmulShapes s, matmul_shapes(context, a->shape(), b->shape()));
  if (std::optional<Tensor> fast = matmul_integer_quads(context, s, a->reshaped(s.a), b->reshaped(s.b),
                                                        context.input(2), context.input(3), packed)) {
    context.outputs[0] = fast->reshaped(s.out);
    return Status::ok();
  }
  if (rows)
    if (std::optional<Tensor> fast = matmul_integer_rows(context, s, a->reshaped(s.a), context.input(2), *rows)) {
      context.outputs[0] = fast->reshaped(s.out);
      return Status::ok();
    }
  QFLOW_ASSIGN_OR_RETURN(const Tensor a32, subtract_matmul_zero_point(context, a->reshaped(s.a), context.input(2),
                                                                      MatmulSide::A, "a_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor b32, subtract_matmul_zero_point(context, b->reshaped(s.b), context.input(3),
                                                                      MatmulSide::B, "b_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor acc,
                         batched_matmul_s32(context, s, a32, b32, is_8bit(a->dtype()) && is_8bit(b->dtype())));
  context.outputs[0] = acc.reshaped(s.out);
  return Status::ok();
}

Status qlinear_matmul(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* a, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* a_scale, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* b, context.required_input(3));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* b_scale, context.required_input(4));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* y_scale, context.required_input(6));
  const Tensor* a_zp = context.input(2);
  const Tensor* b_zp = context.input(5);
  const Tensor* y_zp = context.input(7);
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, y_scale, "y_scale"));
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, y_zp, "y_zero_point"));
  const DType out_dtype = y_zp ? y_zp->dtype() : a->dtype();
  QFLOW_ASSIGN_OR_RETURN(const MatmulShapes s, matmul_shapes(context, a->shape(), b->shape()));
  if (a_zp && a_zp->shape() != a_scale->shape())
    return context.error("a_zero_point shape " + shape_to_string(a_zp->shape()) + " differs from a_scale shape " +
                         shape_to_string(a_scale->shape()));
  if (b_zp && b_zp->shape() != b_scale->shape())
    return context.error("b_zero_point shape " + shape_to_string(b_zp->shape()) + " differs from b_scale shape " +
                         shape_to_string(b_scale->shape()));
  QFLOW_ASSIGN_OR_RETURN(const Shape a_scale_shape,
                         matmul_param_shape(context, *a_scale, s.a, MatmulSide::A, "a_scale"));
  QFLOW_ASSIGN_OR_RETURN(const Shape b_scale_shape,
                         matmul_param_shape(context, *b_scale, s.b, MatmulSide::B, "b_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> as, read_scales(context, *a_scale, "a_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> bs, read_scales(context, *b_scale, "b_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> ys, read_scales(context, *y_scale, "y_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> yz, read_zero_points(context, y_zp, 1, "y_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor a32,
                         subtract_matmul_zero_point(context, a->reshaped(s.a), a_zp, MatmulSide::A, "a_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor b32,
                         subtract_matmul_zero_point(context, b->reshaped(s.b), b_zp, MatmulSide::B, "b_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor acc,
                         batched_matmul_s32(context, s, a32, b32, is_8bit(a->dtype()) && is_8bit(b->dtype())));
  Tensor y(out_dtype, s.full_out);
  const Status requantized = dispatch_quantized(out_dtype, [&]<typename Q>() {
    const int32_t* in = acc.data<int32_t>();
    Q* out = y.data<Q>();
    const float y_scale_value = ys[0];
    const int32_t y_zero_point = yz[0];
    // The multiplier is formed in float32 as ONNX Runtime does: a_scale * b_scale / y_scale.
    for_each_broadcast(s.full_out, a_scale_shape, b_scale_shape, [&](int64_t i, int64_t ia, int64_t ib) {
      const float multiplier = as[static_cast<std::size_t>(ia)] * bs[static_cast<std::size_t>(ib)] / y_scale_value;
      out[i] = saturate_round<Q>(static_cast<float>(in[i]) * multiplier, y_zero_point);
    });
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(with_node(context, requantized));
  context.outputs[0] = y.reshaped(s.out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Conv family

// A 2-D convolution of 8-bit operands through the int16 GEMM of the fixed-point runtime
// (runtime/fixed_point/fast_kernels.h), where the byte quads of VNNI CPUs (conv_quads.h) do
// not apply: centred 8-bit values fit int16 and a pair of their
// products fits int32, and the caller checked no sum of `kc` products can leave int32, so
// the int32 sums are the exact ones. Columns are pixel-major int16 (padding is 0 once the
// zero point is subtracted), built and multiplied block by block on the pool.
template <typename X, typename W>
void conv2d_s16(const KernelContext& context, const ConvGeometry& g, const X* px, int32_t x_zero_point, const W* pw,
                const std::vector<int32_t>& w_zero_point, int32_t* py) {
  namespace fast = fx::fast;
  const int64_t m = g.out_channels, mg = g.out_channels_per_group(), cg = g.in_channels_per_group();
  const int64_t kh = g.kernel[0], kw = g.kernel[1], kc = cg * kh * kw;
  const int64_t in_h = g.in_spatial[0], in_w = g.in_spatial[1], out_w = g.out_spatial[1];
  const int64_t out_size = g.out_size(), in_size = g.in_size();
  const int64_t rows = round_up(mg, fast::kRowBlock), depth = round_up(kc, fast::kDepthStep);
  // Weights per group: [rows][depth] int16, padded with zeros.
  std::vector<int16_t> weights(static_cast<std::size_t>(g.group * rows * depth), 0);
  for (int64_t oc = 0; oc < m; ++oc) {
    const int32_t zp = w_zero_point[w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(oc)];
    int16_t* row = weights.data() + ((oc / mg) * rows + oc % mg) * depth;
    for (int64_t j = 0; j < kc; ++j) row[j] = static_cast<int16_t>(static_cast<int32_t>(pw[oc * kc + j]) - zp);
  }
  // The group's input, centred and zero padded once, so a column reads each kernel row's
  // taps without bounds tests.
  const int64_t pad_h = in_h + g.pads_begin[0] + g.pads_end[0], pad_w = in_w + g.pads_begin[1] + g.pads_end[1];
  std::vector<int16_t> padded(static_cast<std::size_t>(cg * pad_h * pad_w));
  // Where reduction index k = (ci, ky, kx) reads, from a pixel's window origin in the plane.
  std::vector<int64_t> taps(static_cast<std::size_t>(kc));
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx)
        taps[static_cast<std::size_t>((ci * kh + ky) * kw + kx)] =
            (ci * pad_h + ky * g.dilations[0]) * pad_w + kx * g.dilations[1];
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const X* plane = px + (n * g.in_channels + grp * cg) * in_size;
      context.parallel_for(cg * pad_h, pad_w, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t ci = r / pad_h, iy = r % pad_h - g.pads_begin[0];
          int16_t* dst = padded.data() + r * pad_w;
          std::fill(dst, dst + pad_w, int16_t{0});
          if (iy < 0 || iy >= in_h) continue;
          const X* src = plane + ci * in_size + iy * in_w;
          for (int64_t ix = 0; ix < in_w; ++ix)
            dst[g.pads_begin[1] + ix] = static_cast<int16_t>(static_cast<int32_t>(src[ix]) - x_zero_point);
        }
      });
      gemm_s16_columns(context, weights.data() + grp * rows * depth, mg, rows, depth, kc, out_size,
                       py + (n * m + grp * mg) * out_size, out_size, [&](int64_t p0, int64_t count, int16_t* columns) {
                         for (int64_t c = 0; c < count; ++c) {
                           const int64_t pos = p0 + c, oy = pos / out_w, ox = pos % out_w;
                           const int16_t* origin = padded.data() + oy * g.strides[0] * pad_w + ox * g.strides[1];
                           int16_t* col = columns + c * depth;
                           for (int64_t k = 0; k < kc; ++k) col[k] = origin[taps[static_cast<std::size_t>(k)]];
                         }
                       });
    }
  }
}

// Exact int32 convolution of (x - x_zero_point) with (w - w_zero_point[m]): im2col over
// zero-point-free input (so padding is 0) and one GEMM per image and group.
Expected<Tensor> conv_s32(const KernelContext& context, const Tensor& x, int32_t x_zero_point, const Tensor& w,
                          const std::vector<int32_t>& w_zero_point) {
  auto geometry = make_conv_geometry(read_conv_attributes(context.node), x.shape(), w.shape());
  if (!geometry) return context.error(geometry.status().message());
  const ConvGeometry& g = *geometry;
  const int64_t m = g.out_channels, mg = g.out_channels_per_group(), cg = g.in_channels_per_group();
  const int64_t kc = cg * g.kernel_size(), in_size = g.in_size(), out_size = g.out_size();
  if (w_zero_point.size() != 1 && static_cast<int64_t>(w_zero_point.size()) != m)
    return context.error("w_zero_point has " + std::to_string(w_zero_point.size()) + " values, expected 1 or " +
                         std::to_string(m));
  // 8-bit operands of a 2-D convolution: centred values are at most 255 in magnitude, so a
  // reduction below 2^31 / 255^2 products cannot leave int32.
  const bool eight_bit = is_8bit(x.dtype()) && is_8bit(w.dtype());
  if (eight_bit && g.rank() == 2 && kc <= (int64_t{1} << 31) / (255 * 255) - 1) {
    // Every element is written: a dead buffer of the run will do.
    auto made = context.allocate(DType::Int32, g.column_shape());
    if (!made) return context.error("output: " + made.status().message());
    Tensor out = std::move(made).value();
    if (conv_quads_apply(g, x.dtype(), w.dtype())) {
      conv2d_quads_s32(context, g, x, x_zero_point, w, w_zero_point, out.data<int32_t>());
      return out;
    }
    const auto run = [&]<typename X, typename W>() {
      conv2d_s16<X, W>(context, g, x.data<X>(), x_zero_point, w.data<W>(), w_zero_point, out.data<int32_t>());
    };
    if (x.dtype() == DType::UInt8 && w.dtype() == DType::Int8) run.template operator()<uint8_t, int8_t>();
    else if (x.dtype() == DType::UInt8) run.template operator()<uint8_t, uint8_t>();
    else if (w.dtype() == DType::Int8) run.template operator()<int8_t, int8_t>();
    else run.template operator()<int8_t, uint8_t>();
    return out;
  }

  std::vector<int32_t> weights(static_cast<std::size_t>(m * kc));
  const Status weighted = dispatch_quantized(w.dtype(), [&]<typename T>() {
    const T* pw = w.data<T>();
    for (int64_t oc = 0; oc < m; ++oc) {
      const int32_t zp = w_zero_point[w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(oc)];
      for (int64_t j = 0; j < kc; ++j) weights[static_cast<std::size_t>(oc * kc + j)] = pw[oc * kc + j] - zp;
    }
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(with_node(context, weighted));

  auto made = Tensor::make(DType::Int32, g.column_shape());
  if (!made) return context.error("output: " + made.status().message());
  Tensor out = std::move(made).value();
  std::vector<int32_t> image(static_cast<std::size_t>(g.in_channels * in_size));
  const bool pointwise = g.is_pointwise();
  const Status convolved = dispatch_quantized(x.dtype(), [&]<typename T>() {
    for (int64_t n = 0; n < g.batch; ++n) {
      const T* px = x.data<T>() + n * g.in_channels * in_size;
      context.parallel_for(static_cast<int64_t>(image.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) image[static_cast<std::size_t>(i)] = static_cast<int32_t>(px[i]) - x_zero_point;
      });
      for (int64_t grp = 0; grp < g.group; ++grp) {
        const int32_t* plane = image.data() + grp * cg * in_size;
        const int32_t* wg = weights.data() + grp * mg * kc;
        int32_t* y = out.data<int32_t>() + (n * m + grp * mg) * out_size;
        if (pointwise) {
          gemm_s32_parallel(context, wg, kc, plane, in_size, y, out_size, mg, kc, out_size);
          continue;
        }
        // Each chunk of output positions unfolds only its own columns, bounding memory.
        context.parallel_for(out_size, 2 * kc * mg, [&](int64_t b, int64_t e) {
          constexpr int64_t kBlock = 4096;
          std::vector<int32_t> columns(static_cast<std::size_t>(kc * std::min(kBlock, e - b)));
          for (int64_t c0 = b; c0 < e; c0 += kBlock) {
            const int64_t c1 = std::min(e, c0 + kBlock);
            im2col<int32_t>(plane, g, cg, 0, c0, c1, columns.data());
            gemm_s32(wg, kc, columns.data(), c1 - c0, y + c0, out_size, mg, kc, c1 - c0);
          }
        });
      }
    }
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(with_node(context, convolved));
  return out;
}

// Zero points share their operand's type; w's is per tensor or per output channel.
Status check_conv_zero_points(const KernelContext& context, const Tensor& x, const Tensor* x_zp, const Tensor& w,
                              const Tensor* w_zp) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return context.error("x and w must have the same rank, 3 or more; got " + shape_to_string(x.shape()) + " and " +
                         shape_to_string(w.shape()));
  if (x_zp && x_zp->dtype() != x.dtype())
    return context.error("x_zero_point type " + std::string(dtype_name(x_zp->dtype())) + " differs from x type " +
                         std::string(dtype_name(x.dtype())));
  if (w_zp && w_zp->dtype() != w.dtype())
    return context.error("w_zero_point type " + std::string(dtype_name(w_zp->dtype())) + " differs from w type " +
                         std::string(dtype_name(w.dtype())));
  if (w_zp && (w_zp->rank() > 1 || (w_zp->numel() != 1 && w_zp->numel() != w.dim(0))))
    return context.error("w_zero_point shape " + shape_to_string(w_zp->shape()) + " is neither a scalar nor [" +
                         std::to_string(w.dim(0)) + "]");
  return Status::ok();
}

Status conv_integer(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  const Tensor* x_zp = context.input(2);
  const Tensor* w_zp = context.input(3);
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, x_zp, "x_zero_point"));
  QFLOW_RETURN_IF_ERROR(check_conv_zero_points(context, *x, x_zp, *w, w_zp));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> xz, read_zero_points(context, x_zp, 1, "x_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> wz, read_zero_points(context, w_zp, 1, "w_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(context.outputs[0], conv_s32(context, *x, xz[0], *w, wz));
  return Status::ok();
}

Status qlinear_conv(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x_scale, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(3));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w_scale, context.required_input(4));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* y_scale, context.required_input(6));
  const Tensor* x_zp = context.input(2);
  const Tensor* w_zp = context.input(5);
  const Tensor* y_zp = context.input(7);
  const Tensor* bias = context.input(8);
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, x_scale, "x_scale"));
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, x_zp, "x_zero_point"));
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, y_scale, "y_scale"));
  QFLOW_RETURN_IF_ERROR(require_per_tensor(context, y_zp, "y_zero_point"));
  if (w_scale->rank() > 1 || (w_zp && w_zp->rank() > 1))
    return context.error("w_scale and w_zero_point must be scalars or 1-D (per output channel)");
  QFLOW_RETURN_IF_ERROR(check_conv_zero_points(context, *x, x_zp, *w, w_zp));
  const int64_t m = w->dim(0);
  if (w_scale->numel() != 1 && w_scale->numel() != m)
    return context.error("w_scale has " + std::to_string(w_scale->numel()) + " values, expected 1 or " +
                         std::to_string(m));
  if (bias && (bias->dtype() != DType::Int32 || bias->rank() != 1 || bias->numel() != m))
    return context.error("bias must be int32 of shape [" + std::to_string(m) + "], got " +
                         std::string(dtype_name(bias->dtype())) + " " + shape_to_string(bias->shape()));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> xs, read_scales(context, *x_scale, "x_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> ws, read_scales(context, *w_scale, "w_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<float> ys, read_scales(context, *y_scale, "y_scale"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> xz, read_zero_points(context, x_zp, 1, "x_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> wz, read_zero_points(context, w_zp, 1, "w_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<int32_t> yz, read_zero_points(context, y_zp, 1, "y_zero_point"));
  QFLOW_ASSIGN_OR_RETURN(const Tensor acc, conv_s32(context, *x, xz[0], *w, wz));

  // Per output channel multiplier in float32, in ONNX Runtime's order: x_scale * w_scale / y_scale.
  std::vector<float> multiplier(static_cast<std::size_t>(m));
  for (int64_t oc = 0; oc < m; ++oc)
    multiplier[static_cast<std::size_t>(oc)] = xs[0] * ws[ws.size() == 1 ? 0 : static_cast<std::size_t>(oc)] / ys[0];
  const DType out_dtype = y_zp ? y_zp->dtype() : x->dtype();
  Tensor y(out_dtype, acc.shape());
  const int64_t plane = acc.numel() / std::max<int64_t>(1, acc.dim(0) * m);
  const Status requantized = dispatch_quantized(out_dtype, [&]<typename Q>() {
    const int32_t* in = acc.data<int32_t>();
    const int32_t* b = bias ? bias->data<int32_t>() : nullptr;
    Q* out = y.data<Q>();
    context.parallel_for(acc.dim(0) * m, 4 * plane, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t oc = row % m;
        const int32_t add = b ? b[oc] : 0;
        const float mult = multiplier[static_cast<std::size_t>(oc)];
        for (int64_t i = row * plane; i < (row + 1) * plane; ++i)
          out[i] = saturate_round<Q>(static_cast<float>(in[i] + add) * mult, yz[0]);
      }
    });
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(with_node(context, requantized));
  context.outputs[0] = std::move(y);
  return Status::ok();
}

// MatMulInteger with its constant 2-D B (and zero point) packed once: for the byte-quad GEMM
// on VNNI CPUs, as int16 rows elsewhere.
class MatMulIntegerKernel final : public Kernel {
 public:
  MatMulIntegerKernel(std::optional<QuadB> packed, std::optional<RowsB> rows)
      : packed_(std::move(packed)), rows_(std::move(rows)) {}
  Status compute(KernelContext& context) const override {
    return matmul_integer(context, packed_ ? &*packed_ : nullptr, rows_ ? &*rows_ : nullptr);
  }

 private:
  std::optional<QuadB> packed_;
  std::optional<RowsB> rows_;
};

Expected<std::unique_ptr<Kernel>> make_matmul_integer(const Node&, int64_t,
                                                      const std::vector<const Tensor*>& constants) {
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  const Tensor* b_zp = constants.size() > 3 ? constants[3] : nullptr;
  std::optional<QuadB> packed;
  std::optional<RowsB> rows;
  // The zero point must be constant too (or absent: then input 3 is not bound at all).
  const bool zp_known = b_zp || constants.size() <= 3;
  if (b && zp_known && b->rank() == 2 && is_8bit(b->dtype()) && is_per_tensor(b_zp) &&
      (!b_zp || b_zp->dtype() == b->dtype())) {
    const int32_t zb = zero_point_of(b_zp);
    if (fx::fast::quads_supported(fx::fast::best_isa()))
      packed = pack_quad_b_any(*b, zb, b->dim(0), b->dim(1));
    else
      rows = b->dtype() == DType::Int8 ? pack_rows_b(b->data<int8_t>(), zb, b->dim(0), b->dim(1))
                                       : pack_rows_b(b->data<uint8_t>(), zb, b->dim(0), b->dim(1));
  }
  return std::unique_ptr<Kernel>(new MatMulIntegerKernel(std::move(packed), std::move(rows)));
}

}  // namespace

namespace quant_detail {

void register_qlinear_kernels(KernelRegistry& registry) {
  registry.add("", "MatMulInteger", 10, kLatestOpset, make_matmul_integer);
  registry.add_function("", "QLinearMatMul", 10, kLatestOpset, qlinear_matmul);
  registry.add_function("", "ConvInteger", 10, kLatestOpset, conv_integer);
  registry.add_function("", "QLinearConv", 10, kLatestOpset, qlinear_conv);
}

}  // namespace quant_detail

}  // namespace qflow
