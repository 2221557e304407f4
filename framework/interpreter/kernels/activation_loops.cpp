// Activation loops over float32 values, compiled for the baseline, AVX2 and (the Conv/Gemm
// epilogue) AVX-512, picked at run time within the instruction-set cap, QFLOW_ISA: the same
// per-element operations at other vector widths. The file is compiled with -ffp-contract=off
// (AVX-512F implies FMA), so nothing is contracted and every copy gives the bits of the
// separate nodes. The epilogue runs the common programs of CNNs (bias, then BatchNorm, then
// Clip or Relu, each optional) as one loop per row, others stage by stage over L1-sized
// blocks of a row, 8 or 16 lanes at a time; Clip on its own is one loop.
#include "framework/interpreter/kernels/activation.h"

#include <limits>

#include "framework/interpreter/kernel_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::activation {

namespace {

using Kind = EpilogueStage::Kind;

// The fused form of a program: which of BatchNorm then Clip/Relu it holds, or none.
struct Fused {
  bool ok = false;
  const EpilogueStage* batchnorm = nullptr;
  const EpilogueStage* clamp = nullptr;  // Clip or Relu
};

Fused fused_form(const Epilogue* epilogue) {
  Fused f;
  if (!epilogue) {
    f.ok = true;
    return f;
  }
  std::size_t i = 0;
  const auto& stages = epilogue->stages;
  if (i < stages.size() && stages[i].kind == Kind::BatchNorm) f.batchnorm = &stages[i++];
  if (i < stages.size() && (stages[i].kind == Kind::Clip || stages[i].kind == Kind::Relu)) f.clamp = &stages[i++];
  f.ok = i == stages.size();
  return f;
}

// Every element goes through the stages' own expressions in program order.
template <bool kBias, bool kBatchNorm, int kClamp>  // kClamp: 0 none, 1 Clip, 2 Relu
[[gnu::always_inline]] inline void fused_row(float* data, int64_t n, float b, float mean, float factor, float shift,
                                             float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = data[i];
    if constexpr (kBias) v += b;
    if constexpr (kBatchNorm) v = (v - mean) * factor + shift;
    if constexpr (kClamp == 1) v = clip(v, lo, hi);
    if constexpr (kClamp == 2) v = relu(v);
    data[i] = v;
  }
}

template <bool kBias, bool kBatchNorm, int kClamp>
[[gnu::always_inline]] inline void fused_rows(const Fused& f, float* data, int64_t rows, int64_t n, int64_t ld,
                                              int64_t channel, const float* bias) {
  const float lo = f.clamp && f.clamp->kind == Kind::Clip ? f.clamp->lo : 0.0f;
  const float hi = f.clamp && f.clamp->kind == Kind::Clip ? f.clamp->hi : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    float mean = 0, factor = 0, shift = 0;
    if constexpr (kBatchNorm) {
      const auto c = static_cast<std::size_t>(channel + r);
      mean = f.batchnorm->mean[c], factor = f.batchnorm->factor[c], shift = f.batchnorm->bias[c];
    }
    fused_row<kBias, kBatchNorm, kClamp>(data + r * ld, n, kBias ? bias[r] : 0.0f, mean, factor, shift, lo, hi);
  }
}

template <bool kBias, bool kBatchNorm>
[[gnu::always_inline]] inline void by_clamp(const Fused& f, float* data, int64_t rows, int64_t n, int64_t ld,
                                            int64_t channel, const float* bias) {
  if (!f.clamp) fused_rows<kBias, kBatchNorm, 0>(f, data, rows, n, ld, channel, bias);
  else if (f.clamp->kind == Kind::Clip) fused_rows<kBias, kBatchNorm, 1>(f, data, rows, n, ld, channel, bias);
  else fused_rows<kBias, kBatchNorm, 2>(f, data, rows, n, ld, channel, bias);
}

// Eight floats as a GCC vector: `a < b ? b : a` on it is a compare and a blend with exactly
// the scalar's NaN behaviour (std::max(a, b) is `a < b ? b : a`, std::min(a, b) `b < a ? b :
// a`, std::clamp(v, lo, hi) `v < lo ? lo : hi < v ? hi : v`). Passed by reference only: a
// function taking or returning one by value would change the ABI between the clones.
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));
// A program runs stage by stage over blocks this long, so a block stays in L1 between stages
// however long the output row is (a 48x320 plane is 60 KiB).
constexpr int64_t kBlock = 256;

// The FakeQuant stage in the AVX-512 copy: the division v / c is most of its cost, and
// Markstein's sequence gives the same correctly rounded quotient from a product and two
// fused multiply-adds (y = RN(1 / c), q = RN(v * y), r = v - c * q exact, RN(q + r * y)),
// for every quotient whose residual does not underflow. With 2^-60 <= c <= 2^60 the only
// quotients it misses are below 2^-40, which round to 0 as the division's do (measured: no
// difference on 1.6e8 quotients of at least 2^-20, half of them within 4 ulps of a
// half-integer). Before it, NaN becomes 0 (one fix-up) and v is clamped to +-2^18 c (exact:
// c is a power of two times a float): a quotient beyond 2^18 clips to lo or hi whatever it is
// (|lo|, |hi| < 2^17), and within that bound every step is finite, so the clip is a min and
// a max. Eleven vector operations instead of fifteen (compares and blends); then the stage's
// own steps. An AVX2 copy (blends instead of masks) measured slower than the AVX2 division
// and is not kept.
constexpr float kFmaScaleMin = 0x1p-60f, kFmaScaleMax = 0x1p60f;

#if defined(__x86_64__) && defined(__GNUC__)
// min and max with every lane selected: GCC 12's unmasked forms warn about their undefined
// pass-through operand.
constexpr __mmask16 kAllLanes = 0xFFFF;

// fake_quant's lane steps for values v whose quotient v / c is finite (y = RN(1 / c)).
__attribute__((target("avx512f"), always_inline)) inline __m512 fake_quant_finite_avx512(__m512 v, __m512 c, __m512 y,
                                                                                          __m512 lo, __m512 hi) {
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 q = _mm512_mul_ps(v, y);
  __m512 t = _mm512_fmadd_ps(_mm512_fnmadd_ps(c, q, v), y, q);
  t = _mm512_mask_max_ps(t, kAllLanes, t, lo);
  t = _mm512_mask_min_ps(t, kAllLanes, t, hi);
  return _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(t, magic), magic), c);
}

__attribute__((target("avx512f"))) void fake_quant_fma_avx512(const EpilogueStage& stage, float* data, int64_t n) {
  const __m512 c = _mm512_set1_ps(stage.constant), y = _mm512_set1_ps(1.0f / stage.constant);
  const __m512 lo = _mm512_set1_ps(stage.lo), hi = _mm512_set1_ps(stage.hi);
  const __m512 bound = _mm512_set1_ps(0x1p18f * stage.constant), below = _mm512_set1_ps(-0x1p18f * stage.constant);
  // vfixupimmps: the QNaN and SNaN classes (table entries 0 and 1) answer +0 (token 8),
  // every other class keeps the value (token 0).
  const __m512i nan_to_zero = _mm512_set1_epi32(0x88);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(data + i);
    v = _mm512_fixupimm_ps(v, v, nan_to_zero, 0);
    v = _mm512_mask_max_ps(v, kAllLanes, v, below);
    v = _mm512_mask_min_ps(v, kAllLanes, v, bound);
    _mm512_storeu_ps(data + i, fake_quant_finite_avx512(v, c, y, lo, hi));
  }
}

// x * FakeQuant(HardSigmoid(x)) with the same quotient sequence on the gate. The gate,
// alpha * x + beta (a product, then a sum) clipped to [0, 1], is finite; a NaN x gives a NaN
// gate that the scalar clip keeps and fake_quant turns into 0, and here max(NaN, 0) is 0
// already: gate 0 either way, and x * 0 the same NaN.
__attribute__((target("avx512f"))) void hard_sigmoid_product_quantized_avx512(const EpilogueStage& stage, float* data,
                                                                                int64_t n) {
  const __m512 c = _mm512_set1_ps(stage.constant), y = _mm512_set1_ps(1.0f / stage.constant);
  const __m512 lo = _mm512_set1_ps(stage.lo), hi = _mm512_set1_ps(stage.hi);
  const __m512 alpha = _mm512_set1_ps(static_cast<float>(stage.alpha)), beta = _mm512_set1_ps(static_cast<float>(stage.beta));
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(data + i);
    __m512 gate = _mm512_add_ps(_mm512_mul_ps(alpha, v), beta);
    gate = _mm512_mask_max_ps(gate, kAllLanes, gate, zero);
    gate = _mm512_mask_min_ps(gate, kAllLanes, gate, one);
    _mm512_storeu_ps(data + i, _mm512_mul_ps(v, fake_quant_finite_avx512(gate, c, y, lo, hi)));
  }
}

// The FakeQuant and quantized-gate stages over n (a multiple of 16) floats by the quotient
// sequence; false (nothing done) for other stages and scales outside its range.
__attribute__((target("avx512f"))) bool by_quotient_sequence_avx512(const EpilogueStage& stage, float* data, int64_t n) {
  if (!(stage.constant >= kFmaScaleMin && stage.constant <= kFmaScaleMax)) return false;
  if (stage.kind == EpilogueStage::Kind::FakeQuant) {
    fake_quant_fma_avx512(stage, data, n);
    return true;
  }
  if (stage.kind == EpilogueStage::Kind::HardSigmoidProductQuantized) {
    hard_sigmoid_product_quantized_avx512(stage, data, n);
    return true;
  }
  return false;
}
#endif

// One stage over n floats of output channel `channel`, a vector of Floats at a time (8 or 16
// lanes), each lane computing the scalar expression of apply_stage; the tail and Sigmoid (exp
// has no lane-wise form here) go through apply_stage itself.
template <typename Floats>
[[gnu::always_inline]] inline void stage_lanes(const EpilogueStage& stage, float* data, int64_t n, int64_t channel) {
  constexpr int64_t kLanes = sizeof(Floats) / sizeof(float);
  const int64_t body = stage.kind == Kind::Sigmoid ? 0 : n - n % kLanes;
  const Floats zero = Floats{}, one = Floats{} + 1.0f;
  const auto each = [&](auto&& op) {
    for (int64_t i = 0; i < body; i += kLanes) {
      Floats v;
      __builtin_memcpy(&v, data + i, sizeof v);
      op(v);
      __builtin_memcpy(data + i, &v, sizeof v);
    }
  };
  // The stage's constants as vectors, formed once: `data` is a float pointer, so a stage field
  // read inside the loops would be read again after every store.
  const Floats c = Floats{} + stage.constant;
  const Floats alpha = Floats{} + static_cast<float>(stage.alpha), beta = Floats{} + static_cast<float>(stage.beta);
  const Floats lo = Floats{} + stage.lo, hi = Floats{} + stage.hi, magic = Floats{} + 12582912.0f;
  // g = min(max(alpha * g + beta, 0), 1) in place (vectors by reference: no vector-ABI
  // arguments in this baseline-compiled function), as apply_stage's HardSigmoid computes it.
  const auto hard_sigmoid = [&](Floats& g) {
    g = alpha * g + beta;
    g = g < zero ? zero : g;
    g = one < g ? one : g;
  };
  // fake_quant's steps by division; |t| <= 2^17 after the clip, so adding and removing
  // 1.5 * 2^23 rounds it half to even (the float spacing there is 1) and turns -0 into +0.
  const auto fake_quant = [&](Floats& v) {
    Floats t = v / c;
    t = t == t ? t : zero;
    t = t < lo ? lo : t;
    t = hi < t ? hi : t;
    v = ((t + magic) - magic) * c;
  };
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (sizeof(Floats) == 64) {  // the AVX-512 copy
    if (by_quotient_sequence_avx512(stage, data, body)) {
      apply_stage(stage, data + body, n - body, channel);
      return;
    }
  }
#endif
  switch (stage.kind) {
    case Kind::Relu:
      each([&](Floats& v) { v = zero < v ? v : zero; });
      break;
    case Kind::Clip: {
      each([&](Floats& v) {
        v = v < lo ? lo : v;
        v = hi < v ? hi : v;
      });
      break;
    }
    case Kind::Sigmoid:
      break;
    case Kind::HardSigmoid:
      each(hard_sigmoid);
      break;
    case Kind::HardSwish: {
      const Floats six = Floats{} + 6.0f, half = Floats{} + 0.5f;
      each([&](Floats& v) {
        const Floats t = v / six + half;
        const Floats upper = one < t ? one : t;
        v = v * (t < zero ? zero : upper);
      });
      break;
    }
    case Kind::BatchNorm: {
      const std::size_t p = static_cast<std::size_t>(channel);
      const Floats m = Floats{} + stage.mean[p], k = Floats{} + stage.factor[p], b = Floats{} + stage.bias[p];
      each([&](Floats& v) { v = (v - m) * k + b; });
      break;
    }
    case Kind::Add:
      each([&](Floats& v) { v = v + c; });
      break;
    case Kind::Mul:
      each([&](Floats& v) { v = v * c; });
      break;
    case Kind::Sub:
      each([&](Floats& v) { v = v - c; });
      break;
    case Kind::SubFrom:
      each([&](Floats& v) { v = c - v; });
      break;
    case Kind::Div:
      each([&](Floats& v) { v = v / c; });
      break;
    case Kind::DivInto:
      each([&](Floats& v) { v = c / v; });
      break;
    case Kind::HardSwishDiamond: {
      const Floats d = Floats{} + stage.divisor;
      each([&](Floats& v) {
        Floats gate = v + c;
        gate = gate < lo ? lo : gate;
        gate = hi < gate ? hi : gate;
        v = v * gate / d;
      });
      break;
    }
    case Kind::HardSigmoidProduct:
      each([&](Floats& v) {
        Floats gate = v;
        hard_sigmoid(gate);
        v = v * gate;
      });
      break;
    case Kind::HardSigmoidProductQuantized:
      // The gate's pair by division.
      each([&](Floats& v) {
        Floats gate = v;
        hard_sigmoid(gate);
        fake_quant(gate);
        v = v * gate;
      });
      break;
    case Kind::FakeQuant:
      each(fake_quant);
      break;
  }
  apply_stage(stage, data + body, n - body, channel);
}

// The bodies of finish_rows and clip_floats, inlined into each instruction-set variant.
template <typename Floats>
[[gnu::always_inline]] inline void finish_rows_body(const Epilogue* epilogue, float* data, int64_t rows, int64_t n,
                                                    int64_t ld, int64_t channel, const float* bias) {
  const Fused f = fused_form(epilogue);
  if (f.ok) {
    if (bias) {
      if (f.batchnorm) by_clamp<true, true>(f, data, rows, n, ld, channel, bias);
      else by_clamp<true, false>(f, data, rows, n, ld, channel, bias);
    } else {
      if (f.batchnorm) by_clamp<false, true>(f, data, rows, n, ld, channel, bias);
      else by_clamp<false, false>(f, data, rows, n, ld, channel, bias);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row_channel = channel < 0 ? channel : channel + r;
    for (int64_t at = 0; at < n; at += kBlock) {
      float* block = data + r * ld + at;
      const int64_t len = std::min(kBlock, n - at);
      if (bias) {
        const float b = bias[r];
        for (int64_t i = 0; i < len; ++i) block[i] += b;
      }
      for (const EpilogueStage& stage : epilogue->stages) stage_lanes<Floats>(stage, block, len, row_channel);
    }
  }
}

[[gnu::always_inline]] inline void clip_floats_body(const float* in, float* out, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) out[i] = clip(in[i], lo, hi);
}

void finish_rows_baseline(const Epilogue* epilogue, float* data, int64_t rows, int64_t n, int64_t ld, int64_t channel,
                          const float* bias) {
  finish_rows_body<Floats8>(epilogue, data, rows, n, ld, channel, bias);
}

void clip_floats_baseline(const float* in, float* out, int64_t n, float lo, float hi) {
  clip_floats_body(in, out, n, lo, hi);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define QFLOW_ACTIVATION_AVX2 1
__attribute__((target("avx2"))) void finish_rows_avx2(const Epilogue* epilogue, float* data, int64_t rows, int64_t n,
                                                      int64_t ld, int64_t channel, const float* bias) {
  finish_rows_body<Floats8>(epilogue, data, rows, n, ld, channel, bias);
}

__attribute__((target("avx512f"))) void finish_rows_avx512(const Epilogue* epilogue, float* data, int64_t rows,
                                                           int64_t n, int64_t ld, int64_t channel, const float* bias) {
  finish_rows_body<Floats16>(epilogue, data, rows, n, ld, channel, bias);
}

__attribute__((target("avx2"))) void clip_floats_avx2(const float* in, float* out, int64_t n, float lo, float hi) {
  clip_floats_body(in, out, n, lo, hi);
}

#endif

}  // namespace

void finish_rows(const Epilogue* epilogue, float* data, int64_t rows, int64_t n, int64_t ld, int64_t channel,
                 const float* bias) {
#ifdef QFLOW_ACTIVATION_AVX2
  if (kernel_isa_allows_avx512()) return finish_rows_avx512(epilogue, data, rows, n, ld, channel, bias);
  if (kernel_isa_allows_avx2()) return finish_rows_avx2(epilogue, data, rows, n, ld, channel, bias);
#endif
  finish_rows_baseline(epilogue, data, rows, n, ld, channel, bias);
}

void clip_floats(const float* in, float* out, int64_t n, float lo, float hi) {
#ifdef QFLOW_ACTIVATION_AVX2
  if (kernel_isa_allows_avx2()) return clip_floats_avx2(in, out, n, lo, hi);
#endif
  clip_floats_baseline(in, out, n, lo, hi);
}

}  // namespace qflow::activation
