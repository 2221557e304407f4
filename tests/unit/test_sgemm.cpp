// Unit tests for sgemm: every entry (row-major, strided, A or B packed once, B packed by the
// caller) against a naive triple loop over shapes that straddle the register tile and the
// depth and column blocks, and the promise that packing and blocking never change the bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "framework/interpreter/kernels/sgemm.h"
#include "test_model_util.h"

namespace qflow {
namespace {

using test::noise;

struct Shape3 {
  int64_t m, n, k;
};

// Edges of the 6x16 tile, the 256-deep block, the 96-row and 2048-column blocks, and k = 0.
const Shape3 kShapes[] = {{1, 1, 1},     {5, 17, 3},    {6, 16, 256},  {7, 33, 257}, {13, 31, 513},
                          {97, 50, 300}, {12, 2050, 9}, {200, 40, 600}, {6, 16, 0},  {1, 100, 70},
                          {100, 1, 70},  {95, 15, 255}};

// C = A * B in double, with A [m x k] and B [k x n] row-major.
std::vector<double> reference(const Shape3& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> c(static_cast<std::size_t>(s.m * s.n), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p)
        acc += double(a[static_cast<std::size_t>(i * s.k + p)]) * b[static_cast<std::size_t>(p * s.n + j)];
      c[static_cast<std::size_t>(i * s.n + j)] = acc;
    }
  return c;
}

// The value the AVX2 and AVX-512 tiles must produce: one fused multiply-add chain over k from zero.
std::vector<float> fma_chain(const Shape3& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(static_cast<std::size_t>(s.m * s.n), 0.0f);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < s.k; ++p)
        acc = std::fma(a[static_cast<std::size_t>(i * s.k + p)], b[static_cast<std::size_t>(p * s.n + j)], acc);
      c[static_cast<std::size_t>(i * s.n + j)] = acc;
    }
  return c;
}

void check_close(const Shape3& s, const std::vector<float>& got, const std::vector<double>& want, int64_t ldc) {
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      const double w = want[static_cast<std::size_t>(i * s.n + j)];
      const float g = got[static_cast<std::size_t>(i * ldc + j)];
      INFO("m " << s.m << " n " << s.n << " k " << s.k << " at (" << i << ", " << j << ")");
      REQUIRE(std::fabs(g - w) <= 1e-5 * (1.0 + static_cast<double>(s.k)));
    }
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) return false;
  return true;
}

// Transposes a row-major [rows x cols] matrix.
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return t;
}

// Runs body once per register tile this CPU has, then restores the default.
template <typename Body>
void on_every_isa(Body body) {
  const SgemmIsa saved = sgemm_isa();
  for (const SgemmIsa isa : {SgemmIsa::Portable, SgemmIsa::Avx2, SgemmIsa::Avx512}) {
    if (!sgemm_set_isa(isa)) continue;
    INFO("isa " << static_cast<int>(isa));
    body(isa);
  }
  REQUIRE(sgemm_set_isa(saved));
}

TEST_CASE("sgemm: the best tile is the default and unsupported ones are refused") {
  CHECK(sgemm_isa_supported(SgemmIsa::Portable));
  CHECK(sgemm_isa_supported(sgemm_isa()));
  for (const SgemmIsa isa : {SgemmIsa::Avx2, SgemmIsa::Avx512})
    if (sgemm_isa_supported(isa)) CHECK(static_cast<int>(sgemm_isa()) >= static_cast<int>(isa));
  if (!sgemm_isa_supported(SgemmIsa::Avx512)) CHECK_FALSE(sgemm_set_isa(SgemmIsa::Avx512));
}

TEST_CASE("sgemm: every entry matches a naive loop and the others bit for bit, on every tile") {
  on_every_isa([](SgemmIsa isa) {
  for (const Shape3& s : kShapes) {
    const auto a = noise(s.m * s.k, 1 + static_cast<uint32_t>(s.m)), b = noise(s.k * s.n, 7 + static_cast<uint32_t>(s.n));
    const auto want = reference(s, a, b);
    // C with a wider pitch and a guard value: nothing outside [m x n] may be written.
    const int64_t ldc = s.n + 3;
    const std::vector<float> fresh(static_cast<std::size_t>(s.m * ldc), 1234.5f);

    std::vector<float> plain = fresh;
    sgemm(s.m, s.n, s.k, a.data(), s.k, b.data(), s.n, plain.data(), ldc);
    check_close(s, plain, want, ldc);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = s.n; j < ldc; ++j) REQUIRE(plain[static_cast<std::size_t>(i * ldc + j)] == 1234.5f);
    if (isa != SgemmIsa::Portable) {
      const auto chain = fma_chain(s, a, b);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          REQUIRE(plain[static_cast<std::size_t>(i * ldc + j)] == chain[static_cast<std::size_t>(i * s.n + j)]);
    }

    // Transposed operands read through strides.
    const auto at = transposed(a, s.m, s.k), bt = transposed(b, s.k, s.n);
    std::vector<float> strided = fresh;
    sgemm(s.m, s.n, s.k, SgemmOperand{at.data(), 1, s.m}, SgemmOperand{bt.data(), 1, s.k}, strided.data(), ldc);
    CHECK(same_bits(strided, plain));

    // A packed once, B packed per call.
    const SgemmPackedA pa = sgemm_pack_a(s.m, s.k, SgemmOperand{a.data(), s.k, 1});
    std::vector<float> packed_a = fresh;
    sgemm(pa, s.n, SgemmOperand{b.data(), s.n, 1}, packed_a.data(), ldc);
    CHECK(same_bits(packed_a, plain));

    // B packed once (here from its transpose), A per call.
    const SgemmPackedB pb = sgemm_pack_b(s.k, s.n, SgemmOperand{bt.data(), 1, s.k});
    std::vector<float> packed_b = fresh;
    sgemm(s.m, SgemmOperand{a.data(), s.k, 1}, pb, packed_b.data(), ldc);
    CHECK(same_bits(packed_b, plain));

    // B written into the packed layout by the caller, element by element, over garbage.
    std::vector<float> layout(static_cast<std::size_t>(sgemm_packed_b_size(s.k, s.n)), std::nanf(""));
    sgemm_clear_packed_b_padding(layout.data(), s.k, s.n);
    for (int64_t p = 0; p < s.k; ++p) {
      const SgemmPackedBRow row = sgemm_packed_b_row(layout.data(), s.k, s.n, p);
      for (int64_t j = 0; j < s.n; ++j) *row.at(j) = b[static_cast<std::size_t>(p * s.n + j)];
    }
    for (float v : layout) REQUIRE_FALSE(std::isnan(v));
    std::vector<float> caller = fresh;
    sgemm_prepacked_b(pa, s.n, layout.data(), caller.data(), ldc);
    CHECK(same_bits(caller, plain));
  }
  });
}

TEST_CASE("sgemm: any split of C into blocks gives the same bits as one call") {
  const Shape3 s{50, 70, 530};
  const auto a = noise(s.m * s.k, 3), b = noise(s.k * s.n, 4);
  std::vector<float> whole(static_cast<std::size_t>(s.m * s.n));
  sgemm(s.m, s.n, s.k, a.data(), s.k, b.data(), s.n, whole.data(), s.n);
  const SgemmPackedB pb = sgemm_pack_b(s.k, s.n, SgemmOperand{b.data(), s.n, 1});
  for (int64_t rows : {1, 7, 64}) {
    std::vector<float> split(whole.size());
    for (int64_t r0 = 0; r0 < s.m; r0 += rows)
      sgemm(std::min(rows, s.m - r0), SgemmOperand{a.data() + r0 * s.k, s.k, 1}, pb, split.data() + r0 * s.n, s.n);
    INFO("row blocks of " << rows);
    CHECK(same_bits(split, whole));
  }
  for (int64_t cols : {5, 16, 33}) {
    std::vector<float> split(whole.size());
    for (int64_t c0 = 0; c0 < s.n; c0 += cols)
      sgemm(s.m, std::min(cols, s.n - c0), s.k, a.data(), s.k, b.data() + c0, s.n, split.data() + c0, s.n);
    INFO("column blocks of " << cols);
    CHECK(same_bits(split, whole));
  }
}

TEST_CASE("sgemm: packed layouts put padding at zero and keep the shape") {
  const auto a = noise(7 * 3, 5), b = noise(3 * 17, 6);
  const SgemmPackedA pa = sgemm_pack_a(7, 3, SgemmOperand{a.data(), 3, 1});
  CHECK(pa.m == 7);
  CHECK(pa.k == 3);
  // Second strip of A: row 6 then five padding rows, for each of the 3 steps.
  for (int64_t p = 0; p < 3; ++p) {
    const float* step = pa.data() + 1 * 3 * kSgemmMr + p * kSgemmMr;
    CHECK(step[0] == a[static_cast<std::size_t>(6 * 3 + p)]);
    for (int64_t r = 1; r < kSgemmMr; ++r) CHECK(step[r] == 0.0f);
  }
  const SgemmPackedB pb = sgemm_pack_b(3, 17, SgemmOperand{b.data(), 17, 1});
  CHECK(sgemm_packed_b_size(3, 17) == 3 * 32);
  for (int64_t p = 0; p < 3; ++p) {
    const float* step = pb.data() + 1 * 3 * kSgemmNr + p * kSgemmNr;
    CHECK(step[0] == b[static_cast<std::size_t>(p * 17 + 16)]);
    for (int64_t q = 1; q < kSgemmNr; ++q) CHECK(step[q] == 0.0f);
  }
}

}  // namespace
}  // namespace qflow
