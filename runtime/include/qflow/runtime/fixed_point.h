// Scalar reference of the BPU's integer arithmetic (docs/fixed-point.md is the specification).
// The lowering pass and the device runtime both call these functions, so a quantized model
// computes bit-identical results on the host and on the device. Standard library only.
//
// Every quantized tensor is held as int32_t values inside the range of its QType; the QType
// decides saturation and which accumulator an operation uses. Tensors are dense, row-major
// (NCHW for images). Functions that check their arguments return a Status; they never throw.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "qflow/core/status.h"

#include "qflow/core/status.h"

namespace qflow::fx {

enum class QType { Int8, UInt8, Int16, UInt16 };

struct Range {
  int32_t min = 0;
  int32_t max = 0;
};
Range range_of(QType type);
bool is_16bit(QType type);

// Parameters of one quantized tensor: real = scale * (q - zero_point).
struct QParams {
  double scale = 1.0;
  int32_t zero_point = 0;
  QType type = QType::Int8;
  // Same scale, zero point and type: a tensor passes between the two unchanged.
  friend bool operator==(const QParams&, const QParams&) = default;
};

// ---------------------------------------------------------------------------------------------
// Requantization

// A real multiplier M = mantissa * 2^-31 * 2^-shift. mantissa is in [2^30, 2^31), or 0 for
// M < 2^-63 (such an M rounds every accepted accumulator, |acc| < 2^62, to 0).
// shift is in [-31, 62]: negative shifts encode M >= 1, up to M < 2^31.
struct Multiplier {
  int32_t mantissa = 0;
  int shift = 0;
};
inline constexpr int kMinShift = -31;
inline constexpr int kMaxShift = 62;

// (m, n) nearest to `real` (round half away from zero on the mantissa). `real` must be finite,
// >= 0 and < 2^31.
Status make_multiplier(double real, Multiplier& out);
// The exact value the pair represents (for diagnostics and tests).
double multiplier_value(Multiplier m);

// round_half_away(acc * M): the product acc * mantissa is formed exactly (up to 94 bits), then
// shifted right by 31 + shift with one rounding, half away from zero. Saturates to +-2^62.
// `acc` must satisfy |acc| < 2^62.
int64_t multiply_by_multiplier(int64_t acc, Multiplier m);
// multiply_by_multiplier + zero point, saturated to [lo, hi].
int32_t requantize(int64_t acc, Multiplier m, int32_t zero_point, int32_t lo, int32_t hi);

// Power-of-two platforms: M must be exactly 2^-shift with shift in [-31, 62]; error otherwise.
Status make_pot_shift(double real, int& shift);
// round_half_away(acc * 2^-shift) (a left shift when shift < 0, saturating to +-2^62).
int64_t rounding_shift(int64_t acc, int shift);
int32_t requantize_pot(int64_t acc, int shift, int32_t zero_point, int32_t lo, int32_t hi);

// round_half_away(num / den) for den > 0, exact.
int64_t rounding_divide(int64_t num, int64_t den);

// ---------------------------------------------------------------------------------------------
// Conv2D, MatMul / Gemm

// Supported (activation, weight) type pairs and their accumulators:
//   8-bit x Int8  -> int32        16-bit x Int8 or Int16 -> int48 (held in int64)
Status check_type_pair(QType activation, QType weight);
// The largest reduction length K for which no accumulator can overflow, given the input zero
// point and the largest |bias|.
int64_t max_reduction(QType activation, int32_t activation_zero_point, QType weight, int64_t max_abs_bias);
// The same for an accumulator that holds |values| up to accumulator_max (the fast kernels'
// int32 for 16-bit activations).
int64_t max_reduction(QType activation, int32_t activation_zero_point, QType weight, int64_t max_abs_bias,
                      int64_t accumulator_max);

// Output clamp of a fused Relu / Relu6 / Clip, in quantized output units (intersected with the
// output type's range). The defaults leave the type's range.
struct Clamp {
  int32_t min = INT32_MIN;
  int32_t max = INT32_MAX;
};

struct Conv2DParams {
  int64_t batch = 1, in_channels = 1, in_h = 1, in_w = 1;
  int64_t out_channels = 1, kernel_h = 1, kernel_w = 1;
  int64_t group = 1;
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right (ONNX order)
  std::array<int64_t, 2> dilations{1, 1};
  QParams input, output;
  QType weight_type = QType::Int8;        // weights are symmetric: zero point 0
  std::vector<Multiplier> multipliers;    // 1 or out_channels: s_in * s_w[c] / s_out
  Clamp clamp;
};
int64_t conv_out_h(const Conv2DParams& p);
int64_t conv_out_w(const Conv2DParams& p);
// Every check conv2d makes before computing, on sizes; the input values are checked only when
// `x` is given (the fast kernels of fast_kernels.h check the weights once, the input per run).
Status check_conv2d(const Conv2DParams& p, size_t x_size, const std::span<const int32_t>* x,
                    std::span<const int32_t> w, std::span<const int32_t> bias, size_t y_size);
// x [N, C, H, W], w [M, C/group, kH, kW], bias empty or [M] (int32, scale s_in * s_w[c]),
// y [N, M, oH, oW].
Status conv2d(const Conv2DParams& p, std::span<const int32_t> x, std::span<const int32_t> w,
              std::span<const int32_t> bias, std::span<int32_t> y);

// ConvTranspose (ONNX): x [N, C, H, W], w [C, M/group, kH, kW], y [N, M, oH, oW] with
// oH = stride * (H - 1) + output_padding + dilation * (kH - 1) + 1 - pad_top - pad_bottom.
// `out_channels` is M; multipliers are 1 or M (channel m uses s_w[m mod M/group]).
struct ConvTranspose2DParams : Conv2DParams {
  std::array<int64_t, 2> output_padding{0, 0};
};
int64_t conv_transpose_out_h(const ConvTranspose2DParams& p);
int64_t conv_transpose_out_w(const ConvTranspose2DParams& p);
Status conv_transpose2d(const ConvTranspose2DParams& p, std::span<const int32_t> x, std::span<const int32_t> w,
                        std::span<const int32_t> bias, std::span<int32_t> y);

struct MatMulParams {
  int64_t m = 1, k = 1, n = 1;
  bool b_transposed = false;  // B is [N, K] (Gemm transB = 1) instead of [K, N]
  QParams a, output;
  QType b_type = QType::Int8;
  int32_t b_zero_point = 0;              // 0 for weights; an activation B may have one
  std::vector<Multiplier> multipliers;   // 1 or n: s_a * s_b[j] / s_out
  Clamp clamp;
};
// a [M, K], b [K, N] (or [N, K]), bias empty or [N], y [M, N].
Status matmul(const MatMulParams& p, std::span<const int32_t> a, std::span<const int32_t> b,
              std::span<const int32_t> bias, std::span<int32_t> y);
// Every check matmul makes before computing (A's values only when `a` is given).
Status check_matmul(const MatMulParams& p, size_t a_size, const std::span<const int32_t>* a,
                    std::span<const int32_t> b, std::span<const int32_t> bias, size_t y_size);
// An error naming `what` when a value of v is outside the range of `type`.
Status check_range(std::span<const int32_t> v, QType type, const char* what);

// ---------------------------------------------------------------------------------------------
// Elementwise, Concat

// Add / Sub rescaling, computed once from the three parameter sets.
struct AddParams {
  QParams a, b, output;
  int left_shift = 20;   // 20 for 8-bit inputs, 15 when either input is 16-bit
  Multiplier a_multiplier, b_multiplier, output_multiplier;
  bool subtract = false;
  Clamp clamp;
};
Status make_add_params(const QParams& a, const QParams& b, const QParams& output, bool subtract, AddParams& out);
// Same-shape operands (the caller broadcasts); y may alias a or b.
Status add(const AddParams& p, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y);

struct MulParams {
  QParams a, b, output;
  Multiplier multiplier;  // s_a * s_b / s_out
  Clamp clamp;
};
Status make_mul_params(const QParams& a, const QParams& b, const QParams& output, MulParams& out);
Status mul(const MulParams& p, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y);

// Rescale one tensor from `in` to `out` parameters (identity copy when they are equal).
Status rescale(const QParams& in, const QParams& out, std::span<const int32_t> x, std::span<int32_t> y);

struct ConcatInput {
  std::span<const int32_t> data;
  int64_t axis_dim = 0;  // the input's extent along the concat axis
  QParams params;
};
// Inputs viewed as [outer, axis_dim, inner]; y is [outer, sum(axis_dim), inner].
Status concat(const std::vector<ConcatInput>& inputs, int64_t outer, int64_t inner, const QParams& output,
              std::span<int32_t> y);

// ---------------------------------------------------------------------------------------------
// Pooling

struct Pool2DParams {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1;
  int64_t kernel_h = 1, kernel_w = 1;
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations{1, 1};   // MaxPool only
  bool count_include_pad = false;           // AveragePool only
  QParams input, output;                    // MaxPool requires equal parameters
};
int64_t pool_out_h(const Pool2DParams& p);
int64_t pool_out_w(const Pool2DParams& p);
Status max_pool(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y);
Status average_pool(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y);
// x [N, C, H, W] -> y [N, C, 1, 1].
Status global_average_pool(int64_t batch, int64_t channels, int64_t h, int64_t w, const QParams& input,
                           const QParams& output, std::span<const int32_t> x, std::span<int32_t> y);

// ---------------------------------------------------------------------------------------------
// Resize (output parameters equal the input's)

enum class CoordinateMode { Asymmetric, HalfPixel, AlignCorners };
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
inline constexpr int kResizeFracBits = 15;  // bilinear weights are multiples of 2^-15

struct ResizeParams {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  CoordinateMode coordinate_mode = CoordinateMode::HalfPixel;
  NearestMode nearest_mode = NearestMode::RoundPreferFloor;
  QType type = QType::Int8;
};
// Source index of output index `o` along an axis of input length `in`, output length `out`.
int64_t nearest_source_index(int64_t o, int64_t in, int64_t out, CoordinateMode cm, NearestMode nm);
// Source position of output index `o` in units of 2^-kResizeFracBits (clamped at 0 from below).
int64_t linear_source_position(int64_t o, int64_t in, int64_t out, CoordinateMode cm);
Status resize_nearest(const ResizeParams& p, std::span<const int32_t> x, std::span<int32_t> y);
Status resize_bilinear(const ResizeParams& p, std::span<const int32_t> x, std::span<int32_t> y);

// ---------------------------------------------------------------------------------------------
// Lookup tables

// 8-bit input: one entry per input value, entry k = quantize(f(dequantize(min + k))).
// 16-bit input: 2^(16 - segment_bits) + 1 entries, entry i = quantize(f(dequantize(min +
// i * 2^segment_bits))); values between entries are interpolated linearly.
struct Lut {
  QParams input, output;
  int segment_bits = 0;  // 0 for a direct 8-bit table; 7 or 8 for 16-bit inputs
  std::vector<int32_t> entries;
};
// quantize with round half to even and saturation (as ONNX QuantizeLinear).
int32_t quantize(double real, const QParams& p);
double dequantize(int32_t q, const QParams& p);
// segment_bits is ignored for 8-bit inputs; for 16-bit inputs it must be 7 (513 entries) or 8
// (257 entries). Fails when f returns NaN.
Status build_lut(const std::function<double(double)>& f, const QParams& input, const QParams& output,
                 int segment_bits, Lut& out);
int32_t lut_lookup(const Lut& lut, int32_t q);
Status apply_lut(const Lut& lut, std::span<const int32_t> x, std::span<int32_t> y);

Status build_sigmoid_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);
Status build_tanh_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);
Status build_hard_sigmoid_lut(const QParams& input, const QParams& output, double alpha, double beta,
                              int segment_bits, Lut& out);
Status build_hard_swish_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);
Status build_gelu_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);
Status build_exp_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);
Status build_reciprocal_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out);

// ---------------------------------------------------------------------------------------------
// Softmax and LayerNorm (int16 datapath with tables, nash)

// exp(d * s_in) for d = q - row_max <= 0, in Q30: 4097 entries at d = -4096 * 2^B + i * 2^B,
// linearly interpolated; B in [0, 4] is the smallest with 4096 * 2^B * s_in >= 22 (beyond
// that exp is below 2^-31 and the table yields 0), or 4 (the whole 16-bit difference range).
inline constexpr int kSoftmaxEntries = 4097;
struct SoftmaxParams {
  QParams input, output;
  int segment_bits = 0;            // B
  std::vector<int32_t> exp_table;  // kSoftmaxEntries values, Q30
  Multiplier output_multiplier;    // 2^-30 / s_out
};
Status make_softmax_params(const QParams& input, const QParams& output, SoftmaxParams& out);
// Softmax over rows of length `row` (the last axis): x and y are [rows, row].
Status softmax(const SoftmaxParams& p, int64_t row, std::span<const int32_t> x, std::span<int32_t> y);

// LayerNorm over the last axis with quantized gamma (int16, scale s_gamma, zero point 0) and
// beta (int32, scale s_gamma * 2^-kLayerNormFracBits).
inline constexpr int kLayerNormFracBits = 12;  // the normalized value is Q12
inline constexpr int64_t kLayerNormMaxRow = 8192;
struct LayerNormParams {
  QParams input, output;
  int64_t row = 1;
  std::vector<int32_t> gamma, beta;
  int64_t epsilon = 0;            // epsilon / s_in^2 in units of 2^-16 (input LSB^2), rounded
  Multiplier output_multiplier;   // s_gamma * 2^-12 / s_out
};
Status make_layernorm_params(const QParams& input, const QParams& output, const std::vector<double>& gamma,
                             const std::vector<double>& beta, double epsilon, LayerNormParams& out);
Status layernorm(const LayerNormParams& p, std::span<const int32_t> x, std::span<int32_t> y);
// floor(sqrt(v)), exact.
uint64_t integer_sqrt(uint64_t v);

// ---------------------------------------------------------------------------------------------
// Input conversion: a uint8 camera / image frame to the quantized tensor the first layer reads
// (docs/input-types.md). Colour conversion is BT.601 full range (JPEG / JFIF): Y, U, V in
// [0, 255] with U, V centred on 128, coefficients in Q16, rounded half up by adding 2^15
// before the arithmetic right shift (floor), then clamped to [0, 255]:
//   R = Y + ((91881 * (V - 128) + 32768) >> 16)                          1.402    * 2^16
//   G = Y + ((-22554 * (U - 128) - 46802 * (V - 128) + 32768) >> 16)     0.344136, 0.714136
//   B = Y + ((116130 * (U - 128) + 32768) >> 16)                         1.772    * 2^16
inline constexpr int kColorFracBits = 16;
inline constexpr int32_t kYuvRv = 91881, kYuvGu = 22554, kYuvGv = 46802, kYuvBu = 116130;
// rgb[0..2] = R, G, B of one pixel.
void yuv_to_rgb(int32_t y, int32_t u, int32_t v, int32_t rgb[3]);

// How the frame is stored. nv12: [N, H * 3 / 2, W], the Y plane (H rows) then the UV plane
// (H / 2 rows of W bytes: U, V interleaved at half resolution; each chroma pair serves a 2x2
// block of pixels); H and W even. The others are [N, H, W, C] (nhwc) or [N, C, H, W] (nchw)
// with C = 1 (gray) or 3 (rgb, bgr, yuv444 in their channel order).
enum class PixelFormat { Gray, Rgb, Bgr, Yuv444, Nv12 };
struct InputConvertParams {
  PixelFormat format = PixelFormat::Gray;
  bool nhwc = true;  // ignored for nv12
  int64_t batch = 1, height = 1, width = 1;
  // Converts the frame's Y, U, V channels to R, G, B (yuv444, nv12) before the tables.
  bool yuv_to_rgb = false;
  // Output channel c reads converted channel channels[c] (R, G, B after the conversion, else
  // the frame's channels in stored order: Y, U, V for nv12).
  std::vector<int32_t> channels;
  QParams output;
};
// Channels of the frame before the `channels` selection (1 for gray, else 3).
int64_t frame_channels(PixelFormat format);
// Element count of the frame `p` describes.
int64_t frame_elements(const InputConvertParams& p);
// x: the frame (values in [0, 255]); table: [C][256], table[c * 256 + v] the quantized value
// of output channel c for the 8-bit value v (the normalization and quantization, computed by
// the compiler); y: [N, C, H, W] with C = channels.size(). Errors: sizes, a frame value or a
// table entry outside its range, a channel index out of range.
Status input_convert(const InputConvertParams& p, std::span<const int32_t> x, std::span<const int32_t> table,
                     std::span<int32_t> y);

}  // namespace qflow::fx
