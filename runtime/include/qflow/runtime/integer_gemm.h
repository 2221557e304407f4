// The integer matrix products of the runtime's fast kernels, published for the host's
// reference interpreter (ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul run on
// them): one set of vector code, selected at run time, so both sides compute with the same
// instructions. Exact: int32 accumulators of int16 pairs or byte quads (docs/fixed-point.md,
// "Fast kernels"). Standard library only.
#pragma once

#include <cstdint>

namespace qflow::fx::fast {

// Instruction sets of the inner loops, in order of preference.
enum class Isa { Portable, Avx2, AvxVnni, Avx512Vnni };
// The best instruction set this CPU runs within the cap (qflow/runtime/isa_cap.h).
Isa best_isa();
// Whether this CPU runs `isa` (whatever the cap).
bool isa_supported(Isa isa);
// Whether the instruction-set cap admits `isa` (whatever the CPU).
bool isa_allowed(Isa isa);
// AVX-512 VBMI (byte permutes across a whole vector), which the Avx512Vnni kernels use where
// the CPU has it: 8-bit table lookups and the depthwise byte windows.
bool vbmi_supported();
const char* isa_name(Isa isa);

// Reduction lengths are padded with zeros to a multiple of this (one 256-bit row of int16).
inline constexpr int64_t kDepthStep = 16;
// gemm works on blocks of kRowBlock weight rows times kColBlock input columns.
inline constexpr int64_t kRowBlock = 4;
inline constexpr int64_t kColBlock = 2;

// out[r * ld + c] = init[r] + sum_k w[r * depth + k] * x[c * depth + k] for r < rows, c < cols:
// rows a multiple of kRowBlock, cols of kColBlock, depth of kDepthStep.
void gemm_s16(Isa isa, const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t depth,
              const int32_t* init, int32_t* out, int64_t ld);

// The pixel-major product of conv2d: out[r * ld + c] = init[r] + sum_k (w pair k of row r) . (x pair k
// of column c) for r < rows (a multiple of kRowBlock) and c < cols (a multiple of kPixelBlock). w holds,
// per block of kRowBlock rows, [pairs][kRowBlock][2] int16; x holds [pairs][cols][2] int16.
inline constexpr int64_t kPixelBlock = 16;
void gemm_pairs_s16(Isa isa, const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t pairs,
                    const int32_t* init, int32_t* out, int64_t ld);
// out[2i] = a[i], out[2i + 1] = b[i] for i < n (n a multiple of kPixelBlock).
void interleave_s16(Isa isa, const int16_t* a, const int16_t* b, int64_t n, int16_t* out);

// The 8-bit product of conv2d on VNNI CPUs: out[r * ld + c] = init[r] + sum_q (w quad q of row r) .
// (x quad q of column c) in int32 with wraparound, w signed and x unsigned bytes, for r < rows (a
// multiple of kQuadRowBlock) and c < cols (a multiple of kQuadPixelBlock). w holds, per block of
// kQuadRowBlock rows, [quads][kQuadRowBlock][4] int8; x holds [quads][cols][4] uint8.
inline constexpr int64_t kQuadRowBlock = 8;
inline constexpr int64_t kQuadPixelBlock = 32;
// True where gemm_quads_u8s8 has vector code (VNNI); conv2d uses the int16 pairs elsewhere.
bool quads_supported(Isa isa);
void gemm_quads_u8s8(Isa isa, const int8_t* w, int64_t rows, const uint8_t* x, int64_t cols, int64_t quads,
                     const int32_t* init, int32_t* out, int64_t ld);
// out[4i + j] = rows[j][i] for j < 4 and i < n (n a multiple of 16).
void interleave4_u8(Isa isa, const uint8_t* const rows[4], int64_t n, uint8_t* out);
// out[4i + j] = rows[j][2i] for j < 4 and i < n (n a multiple of 16): a stride-2 conv's quads.
void interleave4_even_u8(Isa isa, const uint8_t* const rows[4], int64_t n, uint8_t* out);
// out[4i + j] = src[j][i * stride] for i < n, j < 4 (any n and stride): a conv's quad columns.
void gather_quads(Isa isa, const uint8_t* const src[4], int64_t n, int64_t stride, uint8_t* out);

}  // namespace qflow::fx::fast
