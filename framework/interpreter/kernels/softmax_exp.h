// The exponentials of a softmax row in double precision, four at a time: the 6625-class head
// of a text recogniser spends most of its Softmax in scalar exp() calls.
#pragma once

#include <cstdint>

namespace qflow {

// Replaces each v[i] (a logit minus the row's maximum, so <= 0, or NaN) by exp(v[i]) and returns
// their sum, added in four lanes ((l0 + l1) + (l2 + l3)). Within 2 ulp of std::exp; values
// below -700 give 0 (exp < 1e-304: nothing once divided by a sum >= 1), NaN stays NaN. The
// AVX2 copy (within the cap, QFLOW_ISA) and the baseline give the same bits.
double exp_in_place_sum(double* v, int64_t n);

}  // namespace qflow
