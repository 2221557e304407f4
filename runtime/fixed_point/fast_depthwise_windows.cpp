// Depthwise conv2d on byte windows (DepthwiseWindows in fast_kernels.h), for 8-bit activations
// on AVX-512 VNNI with VBMI. The int32 path of fast_depthwise.cpp spends a multiply and an add
// per tap and 8 pixels; here one vpdpbusd takes 4 taps of 16 pixels, and the accumulators are
// requantized in registers.
//
// Why it is exact: the input goes in as unsigned bytes u = x + offset, and a tap outside the
// image reads the pad byte zero_point + offset, so every tap contributes w * (u - zero_point -
// offset) once init = bias - (zero_point + offset) * sum(w) is added. vpdpbusd's int32 lanes
// wrap modulo 2^32 on the way and end on the exact sum, which the reference keeps within int32.
// A kernel row that reads only pad rows for every lane of a window would add (zero_point +
// offset) * (its weight sum) to each: it is skipped, and the init of windows of that class of
// kernel rows leaves its sum out (PP-OCR cls skips 3 of a 5x5 kernel's rows on 2-row planes, 2
// on 3-row ones).
#include <algorithm>
#include <utility>

#include "fixed_point/fast_depthwise.h"
#include "fixed_point/fast_requant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FX_WINDOWS_X86 1
#endif

namespace qflow::fx::fast::detail {
namespace {

constexpr int64_t kLanes = 16, kWindow = 64;
// Bytes of the plane buffer before the first plane row: a window starts pads[1] bytes early.
constexpr int64_t kFront = kWindow;

// The window byte that the lane of output row r (of the window's rows) and column ox reads for
// tap column kx, the window starting at column `start` of its first row; kWindow (the pad
// byte) where the tap's column leaves the image.
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

// The kernel rows [first, last) that some lane of a window of output rows [oy_first, oy_last]
// reads inside the image.
std::pair<int64_t, int64_t> image_rows(const Conv2DParams& p, int64_t oy_first, int64_t oy_last) {
  const int64_t kh = p.kernel_h, dy = p.dilations[0], sy = p.strides[0], top = p.pads[0];
  // Kernel row ky reads image rows oy * sy + ky * dy - top for oy in [oy_first, oy_last].
  const auto inside = [&](int64_t ky) {
    return oy_first * sy + ky * dy - top < p.in_h && oy_last * sy + ky * dy - top >= 0;
  };
  int64_t first = 0, last = kh;
  while (first < kh && !inside(first)) ++first;
  while (last > first && !inside(last - 1)) --last;
  return {first, last};
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
  int64_t rows = 1;  // output rows per window
  if (ow <= kLanes) {
    rows = std::min(kLanes / ow, oh);
    while (rows > 1 && window_span(p, rows, ow) >= kWindow) --rows;
  }
  const int64_t lanes = rows > 1 ? ow : std::min(kLanes, ow);
  if (window_span(p, rows, lanes) >= kWindow) return;
  const int64_t chunks = rows > 1 ? 1 : (ow + kLanes - 1) / kLanes;
  DepthwiseWindows d;
  d.row_quads = (kw + 3) / 4;
  d.plane_rows = (oh - 1) * p.strides[0] + (kh - 1) * p.dilations[0] + 1;
  // A run holds kBlock planes: at most 256 MiB, even for a hostile program's pads.
  if (d.plane_rows > kLimit || d.plane_rows * p.in_w > (int64_t{1} << 26)) return;
  // Slack: windows start pads[1] bytes before a row and read 64 bytes from there.
  d.plane_pitch = (kFront + d.plane_rows * p.in_w + kWindow + chunks * kLanes * p.strides[1] + 63) / 64 * 64;
  d.offset = p.input.type == QType::Int8 ? 128 : 0;
  d.index.assign(static_cast<size_t>(chunks * d.row_quads * kWindow), kWindow);
  for (int64_t c = 0; c < chunks; ++c) {
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
  for (int64_t oy = 0; oy < oh; oy += rows) {
    const auto [first, last] = image_rows(p, oy, std::min(oy + rows, oh) - 1);
    int64_t cls = 0;
    while (2 * cls < static_cast<int64_t>(d.kernel_rows.size()) &&
           (d.kernel_rows[static_cast<size_t>(2 * cls)] != first || d.kernel_rows[static_cast<size_t>(2 * cls + 1)] != last))
      ++cls;
    if (2 * cls == static_cast<int64_t>(d.kernel_rows.size())) d.kernel_rows.insert(d.kernel_rows.end(), {first, last});
    for (int64_t c = 0; c < chunks; ++c)
      d.windows.push_back(DepthwiseWindows::Window{
          kFront + oy * p.strides[0] * p.in_w + c * kLanes * p.strides[1] - p.pads[1], oy * ow + c * kLanes,
          rows > 1 ? std::min(rows, oh - oy) * ow : std::min(kLanes, ow - c * kLanes), c, cls});
  }
  const int64_t classes = static_cast<int64_t>(d.kernel_rows.size()) / 2, shift = int64_t{p.input.zero_point} + d.offset;
  d.weights.assign(static_cast<size_t>(p.out_channels * kh * d.row_quads), 0);
  d.init.assign(static_cast<size_t>(classes * p.out_channels), 0);
  std::vector<int64_t> row_sums(static_cast<size_t>(kh));
  for (int64_t m = 0; m < p.out_channels; ++m) {
    std::fill(row_sums.begin(), row_sums.end(), 0);
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int32_t v = w[static_cast<size_t>((m * kh + ky) * kw + kx)];
        auto& quad = d.weights[static_cast<size_t>((m * kh + ky) * d.row_quads + kx / 4)];
        quad = static_cast<int32_t>(static_cast<uint32_t>(quad) | uint32_t{static_cast<uint8_t>(v)} << (8 * (kx % 4)));
        row_sums[static_cast<size_t>(ky)] += v;
      }
    for (int64_t cls = 0; cls < classes; ++cls) {
      int64_t init = bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(m)]};
      for (int64_t ky = d.kernel_rows[static_cast<size_t>(2 * cls)]; ky < d.kernel_rows[static_cast<size_t>(2 * cls + 1)]; ++ky)
        init -= shift * row_sums[static_cast<size_t>(ky)];
      d.init[static_cast<size_t>(cls * p.out_channels + m)] = static_cast<int32_t>(static_cast<uint32_t>(init));  // mod 2^32
    }
  }
  out = std::move(d);
}

bool depthwise_windows_supported(Isa isa) { return isa == Isa::Avx512Vnni && vbmi_supported(); }

#ifdef QFLOW_FX_WINDOWS_X86
namespace {

// Output channels per block: their planes are filled together, and each window runs for all
// of them, so that their vpdpbusd chains overlap and the window's bookkeeping is shared.
constexpr int64_t kBlock = 4;

// Output channels [m0, m0 + T) of one image (y: its output), their planes at `planes` (one per
// channel, plane_pitch apart): every window over the kernel rows its class reads, requantized.
template <int T>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void block_windows(const PackedConv2D& k,
                                                                                    int64_t m0,
                                                                                    const uint8_t* planes,
                                                                                    int32_t* y) {
  const Conv2DParams& p = k.params;
  const DepthwiseWindows& d = k.windows;
  const int64_t rq = d.row_quads, kh = p.kernel_h, row_step = p.dilations[0] * p.in_w;
  const int64_t pitch = d.plane_pitch, pixels = k.out_h * k.out_w, channels = p.out_channels;
  Requantize16 rc[T];
  const int32_t* w[T];
  _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) {
    rc[i] = requantize16_setup(rounding_of(k.multipliers[static_cast<size_t>(m0 + i)]), p.output.zero_point, k.lo, k.hi);
    w[i] = d.weights.data() + (m0 + i) * kh * rq;
  }
  const __m512i pad = _mm512_set1_epi8(static_cast<char>(p.input.zero_point + d.offset));
  for (const DepthwiseWindows::Window& win : d.windows) {
    __m512i acc[T];
    const int32_t* init = d.init.data() + win.rows * channels + m0;
    _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) acc[i] = _mm512_set1_epi32(init[i]);
    const uint8_t* index = d.index.data() + win.chunk * rq * kWindow;
    const int64_t last = d.kernel_rows[static_cast<size_t>(2 * win.rows + 1)];
    for (int64_t ky = d.kernel_rows[static_cast<size_t>(2 * win.rows)]; ky < last; ++ky) {
      __m512i bytes[T];
      _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) bytes[i] =
          _mm512_loadu_si512(planes + i * pitch + win.start + ky * row_step);
      for (int64_t q = 0; q < rq; ++q) {
        const __m512i lanes = _mm512_loadu_si512(index + q * kWindow);
        _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i) acc[i] = _mm512_dpbusd_epi32(
            acc[i], _mm512_permutex2var_epi8(bytes[i], lanes, pad), _mm512_set1_epi32(w[i][ky * rq + q]));
      }
    }
    const auto mask = static_cast<__mmask16>((1u << win.count) - 1);
    _Pragma("GCC unroll 4") for (int i = 0; i < T; ++i)
      _mm512_mask_storeu_epi32(y + (m0 + i) * pixels + win.first, mask, requantize16(rc[i], acc[i]));
  }
}

}  // namespace

void depthwise_windows_conv2d(const PackedConv2D& k, const int32_t* x, int32_t* y, std::vector<uint8_t>& plane) {
  const Conv2DParams& p = k.params;
  const DepthwiseWindows& d = k.windows;
  const auto size = static_cast<size_t>(kBlock * d.plane_pitch);
  if (plane.size() < size) plane.resize(size);
  // Pad rows, the slack around them and the columns windows read past the image stay the pad
  // byte for the whole call; only the image rows are rewritten per channel.
  std::fill(plane.begin(), plane.begin() + static_cast<std::ptrdiff_t>(size),
            static_cast<uint8_t>(p.input.zero_point + d.offset));
  const int64_t top = p.pads[0], image_rows = std::clamp<int64_t>(d.plane_rows - top, 0, p.in_h);
  const int64_t plane_in = p.in_h * p.in_w, mg = p.out_channels / p.group;
  for (int64_t n = 0; n < p.batch; ++n) {
    int32_t* yn = y + n * p.out_channels * k.out_h * k.out_w;
    for (int64_t m0 = 0; m0 < p.out_channels; m0 += kBlock) {
      const int64_t count = std::min(kBlock, p.out_channels - m0);
      for (int64_t i = 0; i < count; ++i)  // the input channel of output channel m0 + i
        convert_to_bytes(Isa::Avx512Vnni, x + (n * p.in_channels + (m0 + i) / mg) * plane_in, image_rows * p.in_w,
                         d.offset, plane.data() + i * d.plane_pitch + kFront + top * p.in_w);
      switch (count) {
        case 4: block_windows<4>(k, m0, plane.data(), yn); break;
        case 3: block_windows<3>(k, m0, plane.data(), yn); break;
        case 2: block_windows<2>(k, m0, plane.data(), yn); break;
        default: block_windows<1>(k, m0, plane.data(), yn); break;
      }
    }
  }
}
#endif

}  // namespace qflow::fx::fast::detail
