// Single-precision GEMM for the float kernels: one blocked driver over packed operands, with
// an AVX2/FMA 6x16 register tile picked at run time when the CPU has it and a portable tile
// otherwise. Constant weights are packed once (SgemmPackedA / SgemmPackedB) and reused by
// every call; other operands are packed per call.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace qflow {

// Register tile (rows of A x columns of B) and depth of one packed block. They define the
// packed layouts below.
inline constexpr int64_t kSgemmMr = 6;
inline constexpr int64_t kSgemmNr = 16;
inline constexpr int64_t kSgemmKc = 256;

// A matrix read through strides: element (r, c) is data[r * row_stride + c * col_stride], so a
// transposed operand needs no copy.
struct SgemmOperand {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;
};

// 64-byte aligned float storage of a packed operand: a 16-column strip row is one cache line.
struct SgemmBuffer {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data;
  int64_t size = 0;
  // Keeps the contents when `n` fits; otherwise a fresh, uninitialised buffer.
  void reserve(int64_t n);
};

// The packed layouts split the depth k into blocks of kSgemmKc (the last may be shorter) of
// depth kc. A [m x k] block p0 holds ceil(m / 6) strips of kc * 6 values: strip s, step p is
// A[6s .. 6s+5][p0 + p]. B [k x n] block p0 holds ceil(n / 16) strips of kc * 16 values: strip
// s, step p is B[p0 + p][16s .. 16s+15]. Block p0 starts at p0 * padded(m) (A) or
// p0 * padded(n) (B). Rows of A and columns of B past the matrix are zero.
struct SgemmPackedA {
  int64_t m = 0, k = 0;
  SgemmBuffer buffer;
  const float* data() const { return buffer.data.get(); }
};
struct SgemmPackedB {
  int64_t k = 0, n = 0;
  SgemmBuffer buffer;
  const float* data() const { return buffer.data.get(); }
};

SgemmPackedA sgemm_pack_a(int64_t m, int64_t k, SgemmOperand a);
SgemmPackedB sgemm_pack_b(int64_t k, int64_t n, SgemmOperand b);

// Elements of a packed [k x n] B, padding included.
int64_t sgemm_packed_b_size(int64_t k, int64_t n);

// Row p of a packed [k x n] B held in caller storage, for producers that write the layout
// directly (im2col): column j is at strip(j)[j % 16].
struct SgemmPackedBRow {
  float* base = nullptr;
  int64_t strip_stride = 0;
  float* at(int64_t j) const { return base + (j / kSgemmNr) * strip_stride + j % kSgemmNr; }
};
SgemmPackedBRow sgemm_packed_b_row(float* packed, int64_t k, int64_t n, int64_t p);
// Zeroes the padding columns [n, padded(n)) of every row of a packed B in caller storage.
void sgemm_clear_packed_b_padding(float* packed, int64_t k, int64_t n);

// C[m x n] = A[m x k] * B[k x n]; C is row-major with pitch ldc. Every element of C is one
// multiply-add chain over k in increasing order starting from zero (fused on the AVX2 and
// AVX-512 tiles),
// whatever the operands' packing, the blocking or the caller's threading: a caller may split
// C into any blocks, or pack an operand once, and get the same bits.
void sgemm(int64_t m, int64_t n, int64_t k, SgemmOperand a, SgemmOperand b, float* c, int64_t ldc);
// Row-major A and B with row pitches lda and ldb.
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc);
// A packed once; B as an operand, or already packed by the caller (sgemm_packed_b_size
// elements for k = a.k).
void sgemm(const SgemmPackedA& a, int64_t n, SgemmOperand b, float* c, int64_t ldc);
void sgemm_prepacked_b(const SgemmPackedA& a, int64_t n, const float* packed_b, float* c, int64_t ldc);
// A [m x b.k] as an operand times B packed once.
void sgemm(int64_t m, SgemmOperand a, const SgemmPackedB& b, float* c, int64_t ldc);
// Its columns [first, first + count) only, `first` a multiple of kSgemmNr, into c (column
// `first` of the output): the values of the whole product's columns, bit for bit (each
// element is one chain over k whatever the tile that computes it).
void sgemm_columns(int64_t m, SgemmOperand a, const SgemmPackedB& b, int64_t first, int64_t count, float* c,
                   int64_t ldc);

// The register tiles: portable (multiply, then add), AVX2/FMA 6x16, and AVX-512 6x32 over two
// strips (6x16 for a lone strip). AVX2 and AVX-512 give the same bits (one fused
// multiply-add chain per element); the portable tile rounds each product.
enum class SgemmIsa { Portable, Avx2, Avx512 };
bool sgemm_isa_supported(SgemmIsa isa);
// The tiles in use: the best this CPU supports, unless sgemm_set_isa chose another.
SgemmIsa sgemm_isa();
// For tests and benchmarks: use `isa` from now on; false (and no change) when unsupported.
// Not to be called while another thread runs sgemm.
bool sgemm_set_isa(SgemmIsa isa);

}  // namespace qflow
