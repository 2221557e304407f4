// Depthwise conv2d on byte windows (DepthwiseWindows in fast_kernels.h), for 8-bit activations
// on AVX-512 VNNI with VBMI. The int32 path of fast_depthwise.cpp spends a multiply and an add
// per tap and 8 pixels; here one vpdpbusd takes 4 taps of 16 pixels, and the accumulators are
// requantized in registers.
//
// Why it is exact: the input goes in as unsigned bytes u = x + offset, and a tap outside the
// image reads the pad byte zero_point + offset, so every tap contributes w * (u - zero_point -
// offset) once init = bias - (zero_point + offset) * sum(w) is added. vpdpbusd's int32 lanes
// wrap modulo 2^32 on the way and end on the exact sum, which the reference keeps within int32.
#include <algorithm>

#include "runtime/fixed_point/fast_depthwise.h"
#include "runtime/fixed_point/fast_requant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FX_WINDOWS_X86 1
#endif

namespace qflow::fx::fast::detail {
namespace {

constexpr int64_t kLanes = 16, kWindow = 64;
// Bytes of the plane buffer before the first plane row: a window starts pads[1] bytes early.
constexpr int64_t kFront = kWindow;

// The byte of window offset `offset` for lane (r, ox) and tap column kx, in the window of
// rows x window-start column `start`; kWindow (the pad byte) where the tap leaves the image.
int64_t window_byte(const Conv2DParams& p, int64_t r, int64_t ox, int64_t kx, int64_t start) {
  const int64_t ix = ox * p.strides[1] + kx * p.dilations[1] - p.pads[1];
  if (ix < 0 || ix >= p.in_w) return kWindow;
  return r * p.strides[0] * p.in_w + ix - start;
}

// The largest window byte the lanes of `rows` output rows of ow columns read (rows == 1:
// `lanes` columns).
int64_t window_span(const Conv2DParams& p, int64_t rows, int64_t lanes) {
  return (rows - 1) * p.strides[0] * p.in_w + (lanes - 1) * p.strides[1] + (p.kernel_w - 1) * p.dilations[1];
}

int64_t plane_bytes(const DepthwiseWindows& d, const Conv2DParams& p) {
  return kFront + d.plane_rows * p.in_w + kWindow + d.chunks * kLanes * p.strides[1];
}

}  // namespace

void pack_depthwise_windows(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                            DepthwiseWindows& out) {
  out = DepthwiseWindows{};
  if (is_16bit(p.input.type) || p.weight_type != QType::Int8 || p.in_channels != p.group) return;
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p), kh = p.kernel_h, kw = p.kernel_w;
  // Geometry a window can hold; the bounds keep every product below in int64.
  constexpr int64_t kLimit = int64_t{1} << 16;
  for (const int64_t v : {p.in_h, p.in_w, p.pads[0], p.strides[0], p.dilations[0] * kh, oh, ow})
    if (v > kLimit) return;
  if (p.pads[1] > kFront || p.strides[1] >= kWindow || p.dilations[1] * kw >= kWindow) return;
  int64_t rows = 1;
  if (ow <= kLanes) {
    rows = std::min(kLanes / ow, oh);
    while (rows > 1 && window_span(p, rows, ow) >= kWindow) --rows;
  }
  const int64_t lanes = rows > 1 ? ow : std::min(kLanes, ow);
  if (window_span(p, rows, lanes) >= kWindow) return;
  DepthwiseWindows d;
  d.rows = rows;
  d.chunks = rows > 1 ? 1 : (ow + kLanes - 1) / kLanes;
  d.row_quads = (kw + 3) / 4;
  d.plane_rows = (oh - 1) * p.strides[0] + (kh - 1) * p.dilations[0] + 1;
  if (d.plane_rows > kLimit || d.plane_rows * p.in_w > (int64_t{1} << 30)) return;
  d.offset = p.input.type == QType::Int8 ? 128 : 0;
  d.index.assign(static_cast<size_t>(d.chunks * d.row_quads * kWindow), kWindow);
  for (int64_t c = 0; c < d.chunks; ++c) {
    const int64_t start = c * kLanes * p.strides[1] - p.pads[1];
    for (int64_t q = 0; q < d.row_quads; ++q)
      for (int64_t lane = 0; lane < kLanes; ++lane)
        for (int64_t j = 0; j < 4 && 4 * q + j < kw; ++j) {
          const int64_t r = rows > 1 ? lane / ow : 0, ox = rows > 1 ? lane % ow : c * kLanes + lane;
          if (r >= rows || ox >= ow) continue;
          d.index[static_cast<size_t>((c * d.row_quads + q) * kWindow + 4 * lane + j)] =
              static_cast<uint8_t>(window_byte(p, r, ox, 4 * q + j, start));
        }
  }
  d.weights.assign(static_cast<size_t>(p.out_channels * kh * d.row_quads), 0);
  d.init.assign(static_cast<size_t>(p.out_channels), 0);
  const int64_t shift = int64_t{p.input.zero_point} + d.offset;
  for (int64_t m = 0; m < p.out_channels; ++m) {
    int64_t sum = 0;
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int32_t v = w[static_cast<size_t>((m * kh + ky) * kw + kx)];
        auto& quad = d.weights[static_cast<size_t>((m * kh + ky) * d.row_quads + kx / 4)];
        quad = static_cast<int32_t>(static_cast<uint32_t>(quad) | uint32_t{static_cast<uint8_t>(v)} << (8 * (kx % 4)));
        sum += v;
      }
    const int64_t init = (bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(m)]}) - shift * sum;
    d.init[static_cast<size_t>(m)] = static_cast<int32_t>(static_cast<uint32_t>(init));  // modulo 2^32
  }
  out = std::move(d);
}

bool depthwise_windows_supported(Isa isa) { return isa == Isa::Avx512Vnni && vbmi_supported(); }

#ifdef QFLOW_FX_WINDOWS_X86
namespace {

// out[i] = x[i] + offset as a byte, for i < n.
__attribute__((target("avx512f"))) void to_bytes(const int32_t* x, int64_t n, int32_t offset, uint8_t* out) {
  const __m512i flip = _mm512_set1_epi32(offset);  // 128 flips the sign bit of an int8's byte
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 lanes = n - i >= kLanes ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_cvtepi32_storeu_epi8(out + i, lanes, _mm512_xor_si512(_mm512_maskz_loadu_epi32(lanes, x + i), flip));
  }
}

// One vector of 16 output pixels: where its kernel row 0 window starts, its index table and
// where its lanes go in the output.
struct Tile {
  const uint8_t* window;
  const uint8_t* index;
  int64_t first, count;
};

// T tiles side by side, so that T chains of vpdpbusd overlap (one chain waits on each sum).
template <int T>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) inline void tiles(
    const Tile* t, int64_t kh, int64_t rq, int64_t row_step, const int32_t* wm, __m512i init, __m512i pad,
    const Requantize16& rc, int32_t* y) {
  __m512i acc[T];
  _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) acc[i] = init;
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t q = 0; q < rq; ++q) {
      const __m512i w = _mm512_set1_epi32(wm[ky * rq + q]);
      _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) {
        const __m512i bytes = _mm512_loadu_si512(t[i].window + ky * row_step);
        const __m512i quads = _mm512_permutex2var_epi8(bytes, _mm512_loadu_si512(t[i].index + q * kWindow), pad);
        acc[i] = _mm512_dpbusd_epi32(acc[i], quads, w);
      }
    }
  _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i)
    _mm512_mask_storeu_epi32(y + t[i].first, static_cast<__mmask16>((1u << t[i].count) - 1), requantize16(rc, acc[i]));
}

// Output channel m of one image: its tiles in groups of 4, each over the kernel rows, then
// requantized.
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void channel_windows(
    const PackedConv2D& k, int64_t m, const uint8_t* plane, int32_t* y) {
  const Conv2DParams& p = k.params;
  const DepthwiseWindows& d = k.windows;
  const int64_t oh = k.out_h, ow = k.out_w, iw = p.in_w, sy = p.strides[0], sx = p.strides[1];
  const int64_t kh = p.kernel_h, rq = d.row_quads, row_step = p.dilations[0] * iw;
  const Requantize16 rc = requantize16_setup(rounding_of(k.multipliers[static_cast<size_t>(m)]), p.output.zero_point,
                                             k.lo, k.hi);
  const __m512i pad = _mm512_set1_epi8(static_cast<char>(p.input.zero_point + d.offset));
  const __m512i init = _mm512_set1_epi32(d.init[static_cast<size_t>(m)]);
  const int32_t* wm = d.weights.data() + m * kh * rq;
  constexpr int kGroup = 4;
  Tile group[kGroup];
  int n = 0;
  for (int64_t oy = 0; oy < oh; oy += d.rows)
    for (int64_t c = 0; c < d.chunks; ++c) {
      group[n++] = Tile{plane + oy * sy * iw + c * kLanes * sx - p.pads[1], d.index.data() + c * rq * kWindow,
                        oy * ow + c * kLanes,
                        d.rows > 1 ? std::min(d.rows, oh - oy) * ow : std::min(kLanes, ow - c * kLanes)};
      if (n == kGroup) {
        tiles<kGroup>(group, kh, rq, row_step, wm, init, pad, rc, y);
        n = 0;
      }
    }
  switch (n) {
    case 3: tiles<3>(group, kh, rq, row_step, wm, init, pad, rc, y); break;
    case 2: tiles<2>(group, kh, rq, row_step, wm, init, pad, rc, y); break;
    case 1: tiles<1>(group, kh, rq, row_step, wm, init, pad, rc, y); break;
    default: break;
  }
}

}  // namespace

void depthwise_windows_conv2d(const PackedConv2D& k, const int32_t* x, int32_t* y, std::vector<uint8_t>& plane) {
  const Conv2DParams& p = k.params;
  const DepthwiseWindows& d = k.windows;
  const auto size = static_cast<size_t>(plane_bytes(d, p));
  if (plane.size() < size) plane.resize(size);
  // Pad rows, the slack around them and the columns windows read past the image stay the pad
  // byte for the whole call; only the image rows are rewritten per channel.
  std::fill(plane.begin(), plane.begin() + static_cast<std::ptrdiff_t>(size),
            static_cast<uint8_t>(p.input.zero_point + d.offset));
  uint8_t* rows = plane.data() + kFront;
  const int64_t top = p.pads[0], image_rows = std::clamp<int64_t>(d.plane_rows - top, 0, p.in_h);
  const int64_t pixels = k.out_h * k.out_w, mg = p.out_channels / p.group;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      to_bytes(x + (n * p.in_channels + g) * p.in_h * p.in_w, image_rows * p.in_w, d.offset, rows + top * p.in_w);
      for (int64_t r = 0; r < mg; ++r) {
        const int64_t m = g * mg + r;
        channel_windows(k, m, rows, y + (n * p.out_channels + m) * pixels);
      }
    }
}
#endif

}  // namespace qflow::fx::fast::detail
