// The hbm fuzzer's mutator keeps the container valid: an unchanged section lays out to the
// same bytes, and a changed or resized section still passes the layout and CRC checks, so
// the reader's error (if any) comes from decoding or validation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/hbm_mutator.h"
#include "qflow/runtime/hbm_reader.h"

namespace qflow::fuzz {

namespace {

std::vector<uint8_t> seed_file() {
  std::ifstream in(QFLOW_HBM_SEED, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// "" when the file passes the layout and CRC checks (it parses, or fails in decoding or
// validation), else the reader's message.
std::string container_error(const std::vector<uint8_t>& bytes) {
  Expected<hbm::HbmFile> file = hbm::parse(std::span<const uint8_t>(bytes.data(), bytes.size()));
  if (file) return "";
  const std::string message = file.status().message();
  for (const char* container : {"CRC", "overlaps", "padding", "extends past", "truncated", "the header declares", "alignment"})
    if (message.find(container) != std::string::npos) return message;
  return "";
}

std::vector<uint8_t> mutated(const std::vector<uint8_t>& seed, unsigned rng_seed, const ByteMutator& mutate,
                             size_t room = 256) {
  std::vector<uint8_t> buffer = seed;
  buffer.resize(seed.size() + room);
  buffer.resize(mutate_hbm(buffer.data(), seed.size(), buffer.size(), rng_seed, mutate));
  return buffer;
}

}  // namespace

TEST_CASE("hbm mutator: an unchanged section lays out to the same file") {
  const std::vector<uint8_t> seed = seed_file();
  REQUIRE(hbm::parse(std::span<const uint8_t>(seed.data(), seed.size())));
  const ByteMutator identity = [](uint8_t*, size_t size, size_t) { return size; };
  for (unsigned s = 0; s < 64; ++s) {
    CAPTURE(s);
    CHECK(mutated(seed, s, identity) == seed);
  }
}

TEST_CASE("hbm mutator: changed bytes get their CRCs, resized sections a new layout") {
  const std::vector<uint8_t> seed = seed_file();
  // The end of the section table: the header-and-table path mutates exactly that many bytes.
  const size_t table_end = (seed[24] | seed[25] << 8) + (seed[20] | seed[21] << 8) * 32u;
  size_t called_with = 0;
  const ByteMutator flip = [&](uint8_t* data, size_t size, size_t) {
    called_with = size;
    data[size / 2] ^= 0x5a;
    return size;
  };
  const ByteMutator grow = [&](uint8_t* data, size_t size, size_t max_size) {
    called_with = size;
    const size_t n = std::min(size + 13, max_size);
    for (size_t i = size; i < n; ++i) data[i] = static_cast<uint8_t>(i);
    return n;
  };
  const ByteMutator shrink = [&](uint8_t*, size_t size, size_t) {
    called_with = size;
    return size > 1 ? size / 2 : size;
  };
  int section_draws = 0, changed = 0;
  for (unsigned s = 0; s < 200; ++s) {
    for (const ByteMutator* mutate : {&flip, &grow, &shrink}) {
      CAPTURE(s);
      const std::vector<uint8_t> out = mutated(seed, s, *mutate);
      if (out != seed) ++changed;
      // Plain bytes (the whole file) and header fields may break the layout on purpose.
      if (called_with == seed.size() || called_with == table_end) continue;
      ++section_draws;
      CHECK(container_error(out) == "");
    }
  }
  CHECK(section_draws > 300);
  CHECK(changed > 500);
}

TEST_CASE("hbm mutator: fix_hbm_checksums repairs a flipped byte, refuses an unreadable header") {
  std::vector<uint8_t> bytes = seed_file();
  bytes[bytes.size() - 1] ^= 1;  // inside the last section
  CHECK(container_error(bytes) != "");
  CHECK(fix_hbm_checksums(bytes.data(), bytes.size()));
  CHECK(container_error(bytes) == "");
  std::vector<uint8_t> tiny(40, 0);
  CHECK_FALSE(fix_hbm_checksums(tiny.data(), tiny.size()));
}

}  // namespace qflow::fuzz
