// SHA-256 (FIPS 180-4) over a byte string, returned as lower-case hex; the block function runs
// on the x86 SHA extensions where the CPU has them (manifests hash every artifact and plugin).
#include "framework/core/sha256.h"

#include <array>
#include <cstdint>

#include <boost/endian/conversion.hpp>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define QFLOW_SHA256_SHANI 1
#endif

namespace qflow {

namespace {

constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress(std::array<uint32_t, 8>& state, const unsigned char* block) {
  std::array<uint32_t, 64> w{};
  for (int i = 0; i < 16; ++i)
    w[i] = boost::endian::load_big_u32(block + 4 * i);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRoundConstants[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

#ifdef QFLOW_SHA256_SHANI
// The 64 rounds of each block with sha256rnds2, four rounds per group, the message schedule
// with sha256msg1/msg2. The state lives as ABEF and CDGH, the layout the instructions use.
__attribute__((target("sha,sse4.1"))) void compress_shani(std::array<uint32_t, 8>& state, const unsigned char* data,
                                                          std::size_t blocks) {
  const __m128i big_endian = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0])), 0xB1);  // CDAB
  __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4])), 0x1B);  // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i msg[4];
    for (int i = 0; i < 4; ++i)
      msg[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)), big_endian);
    for (int group = 0; group < 16; ++group) {
      const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRoundConstants[4 * group]));
      const __m128i wk = _mm_add_epi32(msg[group % 4], k);
      state1 = _mm_sha256rnds2_epu32(state1, state0, wk);
      state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(wk, 0x0E));
      if (group < 12) {
        // Words of group + 4: w[t-16] + s0(w[t-15]), + w[t-7], + s1(w[t-2]).
        __m128i next = _mm_sha256msg1_epu32(msg[group % 4], msg[(group + 1) % 4]);
        next = _mm_add_epi32(next, _mm_alignr_epi8(msg[(group + 3) % 4], msg[(group + 2) % 4], 4));
        msg[group % 4] = _mm_sha256msg2_epu32(next, msg[(group + 3) % 4]);
      }
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), state1);
}

bool cpu_has_sha_extensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & bit_SHA) != 0;
}
#endif

void compress_blocks(std::array<uint32_t, 8>& state, const unsigned char* data, std::size_t blocks,
                     Sha256Impl impl) {
#ifdef QFLOW_SHA256_SHANI
  if (impl == Sha256Impl::ShaExtensions && sha256_supported(impl)) return compress_shani(state, data, blocks);
#endif
  (void)impl;
  for (std::size_t i = 0; i < blocks; ++i) compress(state, data + 64 * i);
}

}  // namespace

bool sha256_supported(Sha256Impl impl) {
  if (impl == Sha256Impl::Portable) return true;
#ifdef QFLOW_SHA256_SHANI
  static const bool has = cpu_has_sha_extensions();
  return has;
#else
  return false;
#endif
}

std::string sha256_hex(std::string_view bytes) {
  return sha256_hex(bytes, sha256_supported(Sha256Impl::ShaExtensions) ? Sha256Impl::ShaExtensions
                                                                       : Sha256Impl::Portable);
}

std::string sha256_hex(std::string_view bytes, Sha256Impl impl) {
  std::array<uint32_t, 8> state = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t full_blocks = bytes.size() / 64;
  compress_blocks(state, data, full_blocks, impl);

  // Padding: 0x80, zeros, then the message length in bits as a big-endian 64-bit number;
  // the tail needs a second block when fewer than 9 bytes remain in the first.
  std::array<unsigned char, 128> tail{};
  const std::size_t rest = bytes.size() - 64 * full_blocks;
  for (std::size_t i = 0; i < rest; ++i) tail[i] = data[64 * full_blocks + i];
  tail[rest] = 0x80;
  const std::size_t tail_size = rest + 9 <= 64 ? 64 : 128;
  const uint64_t bit_length = static_cast<uint64_t>(bytes.size()) * 8;
  boost::endian::store_big_u64(tail.data() + tail_size - 8, bit_length);
  compress_blocks(state, tail.data(), tail_size / 64, impl);

  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (uint32_t word : state)
    for (int shift = 28; shift >= 0; shift -= 4) hex.push_back(kHex[(word >> shift) & 0xf]);
  return hex;
}

}  // namespace qflow
