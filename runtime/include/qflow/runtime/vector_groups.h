// The walk of the vector depthwise loops, shared by the runtime's integer kernels and the host
// interpreter's float ones: an oh x ow plane of outputs in vectors of `width` along the rows,
// handed out kVectorGroup vectors at a time so that each group's accumulators stay in
// registers across all taps.
#pragma once

#include <algorithm>
#include <cstdint>

namespace qflow::vector_groups {

inline constexpr int kVectorGroup = 6;

// Calls visit.template operator()<n>(at, dst, lanes) for each group of n <= kVectorGroup
// vectors: each vector's offset in the input plane (rows row_step apart), its offset in the
// output (rows ow apart) and how many of its outputs exist.
template <typename Visit>
[[gnu::always_inline]] inline void for_each_vector_group(int64_t oh, int64_t ow, int64_t row_step, int64_t width,
                                                         Visit&& visit) {
  const int64_t total = oh * ((ow + width - 1) / width);
  int64_t oy = 0, ox = 0;  // the next vector's first output
  for (int64_t v0 = 0; v0 < total; v0 += kVectorGroup) {
    const int n = static_cast<int>(std::min<int64_t>(kVectorGroup, total - v0));
    int64_t at[kVectorGroup], dst[kVectorGroup];
    int lanes[kVectorGroup];
    for (int i = 0; i < n; ++i) {
      at[i] = oy * row_step + ox;
      dst[i] = oy * ow + ox;
      lanes[i] = static_cast<int>(std::min<int64_t>(width, ow - ox));
      ox += width;
      if (ox >= ow) ox = 0, ++oy;
    }
    switch (n) {
      case 6: visit.template operator()<6>(at, dst, lanes); break;
      case 5: visit.template operator()<5>(at, dst, lanes); break;
      case 4: visit.template operator()<4>(at, dst, lanes); break;
      case 3: visit.template operator()<3>(at, dst, lanes); break;
      case 2: visit.template operator()<2>(at, dst, lanes); break;
      default: visit.template operator()<1>(at, dst, lanes); break;
    }
  }
}

}  // namespace qflow::vector_groups
