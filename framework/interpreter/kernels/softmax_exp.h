// The exponentials of a softmax row in double precision, four at a time, and a whole float
// row: the 6625-class head of a text recogniser spent most of its Softmax in scalar exp() calls.
#pragma once

#include <cstdint>

namespace qflow {

// Replaces each v[i] (a logit minus the row's maximum, so <= 0, or NaN) by exp(v[i]) and returns
// their sum, added in four lanes ((l0 + l1) + (l2 + l3)). Within 2 ulp of std::exp; values
// below -700 give 0 (exp < 1e-304: nothing once divided by a sum >= 1), NaN stays NaN. The
// AVX2 copy (within the cap, QFLOW_ISA) and the baseline give the same bits.
double exp_in_place_sum(double* v, int64_t n);

// Softmax of one contiguous float32 row: dst[i] = float(exp(double(src[i] - max)) / sum) with
// the exponentials and sum of exp_in_place_sum, the bits the Softmax kernel gives a strided
// row. `scratch` holds n doubles.
void softmax_float_row(const float* src, float* dst, int64_t n, double* scratch);

}  // namespace qflow
