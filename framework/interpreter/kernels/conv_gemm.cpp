// Conv's GEMM on the packed sgemm (see conv_gemm.h).
#include "framework/interpreter/kernels/conv_gemm.h"

#include <algorithm>
#include <cstring>

namespace qflow {

namespace {

// The im2col destination of a packed B [rows x n] in caller storage: a row is split into
// 16-column strip pieces, each contiguous; whole pieces copy as one 64-byte block.
struct PackedColumns {
  struct Row {
    SgemmPackedBRow packed;
    template <typename Write>
    void pieces(int64_t j, int64_t count, Write&& write) const {
      while (count > 0) {
        const int64_t q = j % kSgemmNr, len = std::min(count, kSgemmNr - q);
        write(packed.base + (j / kSgemmNr) * packed.strip_stride + q, len);
        j += len;
        count -= len;
      }
    }
    void fill(int64_t j, int64_t count, float value) const {
      pieces(j, count, [value](float* out, int64_t len) { std::fill(out, out + len, value); });
    }
    void copy(int64_t j, int64_t count, const float* src, int64_t stride) const {
      pieces(j, count, [&src, stride](float* out, int64_t len) {
        if (stride == 1 && len == kSgemmNr) std::memcpy(out, src, sizeof(float) * kSgemmNr);
        else
          for (int64_t t = 0; t < len; ++t) out[t] = src[t * stride];
        src += len * stride;
      });
    }
  };
  float* data;
  int64_t rows, n;
  Row row(int64_t r) const { return {sgemm_packed_b_row(data, rows, n, r)}; }
};

}  // namespace

std::unique_ptr<PackedConvWeights> PackedConvWeights::make(const Tensor& weight, int64_t group) {
  if (weight.dtype() != DType::Float32 || weight.rank() < 3 || group <= 0) return nullptr;
  const int64_t m = weight.dim(0), cg = weight.dim(1);
  if (m % group != 0 || (cg == 1 && group > 1)) return nullptr;
  const int64_t mg = m / group, rows = weight.numel() / std::max<int64_t>(1, m);
  std::unique_ptr<PackedConvWeights> packed(new PackedConvWeights());
  packed->source_ = weight;
  const float* w = weight.data<float>();
  for (int64_t gi = 0; gi < group; ++gi)
    packed->groups_.push_back(sgemm_pack_a(mg, rows, SgemmOperand{w + gi * mg * rows, rows, 1}));
  return packed;
}

bool PackedConvWeights::packs(const Tensor& weight) const {
  return weight.dtype() == DType::Float32 && weight.data<float>() == source_.data<float>() &&
         weight.shape() == source_.shape();
}

void conv_gemm_tile(const SgemmPackedA& weights, const float* image, const ConvGeometry& g, int64_t col_begin,
                    int64_t count, float* out, int64_t ldc) {
  if (g.is_pointwise()) {
    // The image already is the column matrix: sgemm packs it per block as it goes.
    sgemm(weights, count, SgemmOperand{image + col_begin, g.in_size(), 1}, out, ldc);
    return;
  }
  const int64_t rows = weights.k;
  thread_local SgemmBuffer panel;
  panel.reserve(sgemm_packed_b_size(rows, count));
  sgemm_clear_packed_b_padding(panel.data.get(), rows, count);
  im2col_into(image, g, g.in_channels_per_group(), 0.0f, col_begin, col_begin + count,
              PackedColumns{panel.data.get(), rows, count});
  sgemm_prepacked_b(weights, count, panel.data.get(), out, ldc);
}

}  // namespace qflow
