// Fast kernels for the 8-bit datapath of conv2d, matmul / gemm, add / sub and mul, and for lut,
// softmax and the pools, bit-identical to the scalar reference of fixed_point.h
// (docs/fixed-point.md, "Fast kernels").
//
// Why they are exact: with 8-bit activations, (x - zp) is in [-255, 255] and an int8 weight
// (minus a B zero point) too, so both fit int16 and a pair of products fits int32; the reference
// refuses any reduction whose accumulator could leave int32 (max_reduction), so an int32
// accumulator never wraps; 16-bit operands sum in int32 per chunk and in int64 across chunks
// (chunk_reduction) (the VNNI conv2d's lanes may wrap on the way, modulo 2^32, and end on
// the exact sum). The requantize epilogue forms |acc| * mantissa exactly in 64 bits (< 2^62) and
// rounds half away from zero with one shift, as multiply_by_multiplier does.
//
// Weights are packed once (pack_conv2d, pack_matmul): int16 rows padded with zeros, and for
// conv2d on VNNI CPUs int8 quads; a run gathers the input into int16 columns or byte quads
// (padding taps are the zero point) and multiplies block by block. Depthwise convolutions (one
// input channel per group) run directly on a zero-padded plane instead, or on AVX-512 VBMI
// CPUs on byte windows with vpdpbusd (DepthwiseWindows). Scratch memory is per
// thread and reused, so runs allocate nothing once warmed up. 16-bit activations stay on the
// reference except in conv2d (depthwise within the bounds supports_conv2d states), matmul,
// add / sub and mul (within the bounds each states). Standard library only (plus compiler intrinsics on x86-64,
// selected at run time).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "qflow/runtime/fixed_point.h"
#include "qflow/runtime/integer_gemm.h"

namespace qflow::fx::fast {

// y[i * stride] = requantize(acc[i], m, zero_point, lo, hi) for i < n (|acc[i]| < 2^31).
void requantize_row(Isa isa, const int32_t* acc, int64_t n, Multiplier m, int32_t zero_point, int32_t lo, int32_t hi,
                    int32_t* y, int64_t stride);

// y[i * stride] = requantize(acc[i], m, zero_point, lo, hi) for 64-bit sums (the chunked
// reductions'), exactly as fx::requantize.
void requantize_wide_row(Isa isa, const int64_t* acc, int64_t n, Multiplier m, int32_t zero_point, int32_t lo,
                         int32_t hi, int32_t* y, int64_t stride);

// y[i * stride] = requantize(bias + 256 * high[i] + low[i], m, zero_point, lo, hi) for i < n: a
// reduction of int16 weights split into halves (weight_high, weight_low) that fits one chunk.
void requantize_halves_row(Isa isa, const int32_t* high, const int32_t* low, int64_t bias, int64_t n, Multiplier m,
                           int32_t zero_point, int32_t lo, int32_t hi, int32_t* y, int64_t stride);

// True for the type pairs these kernels compute: 8-bit activations, int8 weights.
bool supports(QType activation, QType weight);
// conv2d also takes 16-bit activations when every centered value x - zero_point fits int16
// and a sum of `reduction` products plus the bias cannot leave int32: the int32 accumulators
// then hold the exact sums the reference accumulates in 48 bits.
bool supports_conv2d(QType activation, int32_t zero_point, QType weight, int64_t reduction, int64_t max_abs_bias);
// Reductions whose int32 sums could wrap (16-bit activations with long reductions or int16
// weights) run in chunks: each chunk's products summed in int32, the chunk sums added in int64,
// which is exact because no chunk can leave int32. An int16 weight w is split as
// 256 * high + low with high, low in [-128, 128] and both halves multiplied (two products per
// chunk). The most products one chunk may hold, or 0 when the centered activations do not fit
// int16 (no chunked kernel).
int64_t chunk_reduction(QType activation, int32_t zero_point, QType weight, int32_t weight_zero_point = 0);
// True for the matmul type pairs pack_matmul takes: supports(), or a chunked reduction.
bool supports_matmul(QType a, int32_t a_zero_point, QType b, int32_t b_zero_point);
// The halves of an int16 weight: w = 256 * weight_high(w) + weight_low(w).
inline int32_t weight_low(int32_t w) { return ((w + 128) & 255) - 128; }
inline int32_t weight_high(int32_t w) { return (w - weight_low(w)) / 256; }

// The byte-window layout of a depthwise conv2d with 8-bit activations, for AVX-512 VNNI with
// VBMI (fast_depthwise_windows.cpp). A vector of 16 output pixels reads, per kernel row, one
// 64-byte window of a byte plane of the channel (x + offset, pitch in_w, pad rows above and
// below); one vpermi2b per quad of taps picks each lane's 4 bytes, or the pad byte
// (zero_point + offset) where a tap falls outside the image, and vpdpbusd adds the products.
struct DepthwiseWindows {
  struct Window {             // one vector of 16 output pixels, at the same place in every channel
    int64_t start = 0;        // its kernel row 0 window, from the start of a channel's plane
    int64_t first = 0;        // its first output pixel
    int64_t count = 0;        // its output pixels
    int64_t chunk = 0;        // its index table
    int64_t rows = 0;         // its class of kernel rows
  };
  int64_t row_quads = 1;      // quads per kernel row: ceil(kW / 4)
  int64_t plane_rows = 0;     // byte plane rows: pads[0] pad rows, then the image
  int64_t plane_pitch = 0;    // bytes per channel plane, with the slack windows read around it
  int32_t offset = 0;         // 128 for int8 activations, 0 for uint8
  std::vector<Window> windows;
  std::vector<uint8_t> index;        // [chunk][row_quads][64]: window byte per lane and tap; >= 64 the pad byte
  std::vector<int64_t> kernel_rows;  // [class][2]: the kernel rows [first, last) that read the image
  std::vector<int32_t> weights;      // [out_channels][kH][row_quads]: 4 int8 taps each, 0 past kW
  std::vector<int32_t> init;         // [class][out_channels]: bias - (zero_point + offset) * (the weight sum
                                     // of the class's rows), modulo 2^32
};

struct PackedConv2D {
  Conv2DParams params;
  int64_t out_h = 0, out_w = 0;
  int64_t pairs = 0;       // cg * kH * kW reduction indices, in pairs (the last one zero padded)
  int64_t group_rows = 0;  // out_channels / group rounded up to kRowBlock
  std::vector<int16_t> weights;           // [group][group_rows / kRowBlock][pairs][kRowBlock][2], for gemm_pairs_s16
  // Chunked (chunk_reduction): pairs per chunk (0: one int32 pass; depthwise: > 0 when the taps
  // sum in int32 without the bias, added in int64 after), and the weights chunk by
  // chunk: [group][chunk][group_rows / kRowBlock][pairs of the chunk][kRowBlock][2]; an int16
  // weight's high halves in `weights`, its low halves in `weights_low` (empty for int8 weights).
  int64_t chunk_pairs = 0;
  std::vector<int16_t> weights_low;
  std::vector<int32_t> taps;              // [out_channels][kH * kW] instead, for one input channel per group
  std::vector<int32_t> taps_low;          // chunked with int16 weights: the low halves (taps: the high ones)
  DepthwiseWindows windows;               // also for those, where the windows fit (weights not empty)
  std::vector<int32_t> bias;              // [group][group_rows]
  // 8-bit activations also pack for gemm_quads_u8s8: the input goes in as x + quad_offset
  // (unsigned bytes, padding taps zero_point + quad_offset), and quad_init[row] is the bias
  // minus (zero_point + quad_offset) * (the row's weight sum), modulo 2^32.
  int64_t quads = 0;                      // reduction indices in quads (the last one zero padded)
  int64_t quad_rows = 0;                  // out_channels / group rounded up to kQuadRowBlock
  int32_t quad_offset = 0;                // 128 for int8 activations, 0 for uint8
  std::vector<int8_t> quad_weights;       // [group][quad_rows / kQuadRowBlock][quads][kQuadRowBlock][4]
  std::vector<int32_t> quad_init;         // [group][quad_rows]
  int64_t padded_h = 0, padded_w = 0;     // the input plane with its pads (quads, and the pairs'
                                          // im2col); 0 where it would be too large
  std::vector<int64_t> quad_taps;         // [quads * 4]: where reduction index r reads the padded plane
  std::vector<Multiplier> multipliers;    // [out_channels]
  int32_t lo = 0, hi = 0;                 // output bounds (type range and clamp)
};
// Runs every check of fx::conv2d but the input values'; fails for unsupported type pairs.
Status pack_conv2d(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                   PackedConv2D& out);
// fx::conv2d(p, x, w, bias, y) with the packed weights (the same results and errors).
// inputs_in_range (here and below): the caller knows every input value lies inside its type's
// range (the lowered executor knows it of the tensors its ops wrote), so the scan that checks
// it is skipped; with false the kernel checks, and fails or defers to the reference as it must.
Status conv2d(const PackedConv2D& k, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
              bool inputs_in_range = false);

struct PackedMatMul {
  MatMulParams params;
  int64_t depth = 0;  // K rounded up to kDepthStep
  int64_t rows = 0;   // N rounded up to kRowBlock
  std::vector<int16_t> b;               // [rows][depth]: column j of B minus its zero point
  // Chunked (chunk_reduction): depth per chunk (a multiple of kDepthStep; 0: one int32 pass),
  // and B chunk by chunk for gemm_pairs_s16, [chunk][rows / kRowBlock][pairs of the chunk]
  // [kRowBlock][2]; int16 B's high halves in `b`, its low halves in `b_low` (empty for 8-bit B).
  int64_t chunk_depth = 0;
  std::vector<int16_t> b_low;
  std::vector<int32_t> bias;            // [rows]
  // With `quads` (B without a zero point), also for gemm_quads_u8s8 as conv2d's: A goes in as
  // a + quad_offset, and quad_init[j] is bias[j] - (a's zero point + quad_offset) * (column j's
  // sum), modulo 2^32.
  int64_t quads = 0;                    // K in quads (the last one zero padded); 0: not packed
  int64_t quad_rows = 0;                // N rounded up to kQuadRowBlock
  int32_t quad_offset = 0;              // 128 for int8 A, 0 for uint8
  std::vector<int8_t> quad_weights;     // [quad_rows / kQuadRowBlock][quads][kQuadRowBlock][4]
  std::vector<int32_t> quad_init;       // [quad_rows]
  std::vector<Multiplier> multipliers;  // [N]
  int32_t lo = 0, hi = 0;
};
// `quads`: also pack for the VNNI byte product (a constant B; one packed per run skips it).
Status pack_matmul(const MatMulParams& p, std::span<const int32_t> b, std::span<const int32_t> bias,
                   PackedMatMul& out, bool quads = true);
// fx::matmul(p, a, b, bias, y) with the packed B.
Status matmul(const PackedMatMul& k, Isa isa, std::span<const int32_t> a, std::span<int32_t> y,
              bool inputs_in_range = false);

struct PackedConvTranspose2D {
  ConvTranspose2DParams params;
  int64_t out_h = 0, out_w = 0;
  int64_t depth = 0;       // in_channels / group rounded up to kDepthStep
  int64_t group_rows = 0;  // out_channels / group * kH * kW rounded up to kRowBlock
  std::vector<int16_t> weights;         // [group][group_rows][depth]: row (m, tap), column input channel
  // Chunked (chunk_reduction; 16-bit inputs or int16 weights): input channels per chunk (a
  // multiple of kDepthStep; 0: one int32 pass), the weights chunk by chunk, [group][chunk]
  // [group_rows][channels of the chunk], int16 weights' high halves in `weights` and their low
  // halves in `weights_low`; products and outputs then sum in int64.
  int64_t chunk_depth = 0;
  std::vector<int16_t> weights_low;
  std::vector<int32_t> bias;            // [out_channels]
  std::vector<Multiplier> multipliers;  // [out_channels]
  int32_t lo = 0, hi = 0;
  // Kernel = stride, no pads, no output padding, no dilation: every output takes exactly one
  // tap of one input pixel, so the op is a 1x1 conv2d with out_channels * kH * kW outputs
  // (output channel m, tap t at m * kH * kW + t) followed by a depth-to-space move; packed
  // as that conv2d (the fields above are then unused) when its fast kernel takes it.
  std::optional<PackedConv2D> pointwise;
};
// Runs every check of fx::conv_transpose2d but the input values'; fails for unsupported type pairs.
Status pack_conv_transpose2d(const ConvTranspose2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                             PackedConvTranspose2D& out);
// fx::conv_transpose2d(p, x, w, bias, y) with the packed weights (the same results and errors).
Status conv_transpose2d(const PackedConvTranspose2D& k, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                       bool inputs_in_range = false);

// fx::add with 64-bit arithmetic when add_supported (input multipliers below 1, shifted
// operands and their rescaled sum below 2^31: 8-bit and 16-bit inputs); otherwise, or on invalid input, it calls fx::add. y may alias a or b.
bool add_supported(const AddParams& p);
Status add(const AddParams& p, Isa isa, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y,
           bool inputs_in_range = false);

// fx::mul when mul_supported (|(a - z_a) * (b - z_b)| < 2^31: not both operands 16-bit);
// otherwise, or on invalid input, it calls fx::mul. y may alias a or b.
bool mul_supported(const MulParams& p);
Status mul(const MulParams& p, Isa isa, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y,
           bool inputs_in_range = false);

// y[i] = fx::quantize(x[i], q) for every i, inlined; returns the index of the first NaN in x
// (y is then unspecified) or -1.
int64_t quantize(const QParams& q, Isa isa, std::span<const float> x, std::span<int32_t> y);

// y[i] = float(fx::dequantize(x[i], q)) for every i, inlined (the same double expression, so
// the same bits on every instruction set).
void dequantize(const QParams& q, Isa isa, std::span<const int32_t> x, std::span<float> y);

// fx::concat with the rescaled inputs through the int32 requantize epilogue (any type).
Status concat(const std::vector<ConcatInput>& inputs, int64_t outer, int64_t inner, const QParams& output, Isa isa,
              std::span<int32_t> y);

// fx::apply_lut with the range checked once per tensor and the lookup inlined (any table; 8-bit
// tables of byte entries look up 64 values per vpermi2b pair with AVX-512 VBMI, others gather 8
// at a time with AVX2, or on AMD CPUs, whose gathers lose to plain loads, four plain loads at
// a time).
Status apply_lut(const Lut& lut, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                 bool inputs_in_range = false);

// apply_lut's gather lookup, y[i] = e[x[i] - base] (indices in range), whatever the CPU's
// vendor, so that tests cover it everywhere; false without AVX2.
bool lookup_gathered(const int32_t* e, int32_t base, std::span<const int32_t> x, std::span<int32_t> y);

// fx::softmax with the exponentials tabulated once per call and the vector requantize epilogue
// (16-bit inputs: tables of entries in [0, 2^30] with a positive last one); what the reference
// refuses, and other tables of 16-bit inputs, go to the reference.
Status softmax(const SoftmaxParams& p, Isa isa, int64_t row, std::span<const int32_t> x, std::span<int32_t> y,
               bool inputs_in_range = false);

// fx::max_pool, fx::average_pool and fx::global_average_pool on a padded copy of each channel
// (any type); parameters or values the reference refuses go to the reference.
Status max_pool(const Pool2DParams& p, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                bool inputs_in_range = false);
Status average_pool(const Pool2DParams& p, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                    bool inputs_in_range = false);
Status global_average_pool(int64_t batch, int64_t channels, int64_t h, int64_t w, const QParams& input,
                           const QParams& output, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                           bool inputs_in_range = false);

}  // namespace qflow::fx::fast
