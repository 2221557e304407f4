// The float MatMul of the CPU segments (a classifier's head the precision search leaves in
// float: PP-OCRv4 rec's 120 x 6625 product). Each output is the sum, in k order and in double,
// of the products a[i][p] * b[p][j] (exact in double), rounded once to float: what op_matmul's
// loop computed, so every vector width gives its bits.
#pragma once

#include <cstdint>

namespace qflow::lowered::detail {

// y[i * n + j] = float(sum over p < k of double(a[i * k + p]) * double(b[p * n + j])), for
// i < m, j < n.
void matmul_rows(const float* a, const float* b, float* y, int64_t m, int64_t k, int64_t n);

}  // namespace qflow::lowered::detail
